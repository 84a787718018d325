// Small helpers to build the page: elements, formats, state badges and progress bars.
import { isTerminal } from './meta.js';

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'class') el.className = value;
    else if (key === 'text') el.textContent = value;
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export function section(title, ...children) {
  return h('section', { class: 'card' }, h('h2', {}, title), ...children);
}

export function shortId(id) {
  return id ? id.slice(0, 8) : '';
}

export function fmtBytes(bytes) {
  if (bytes === null || bytes === undefined) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
}

export function fmtTime(iso) {
  if (!iso) return '–';
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? iso : date.toLocaleString();
}

export function fmtDuration(fromIso, toIso) {
  if (!fromIso) return '–';
  const seconds = ((toIso ? new Date(toIso) : new Date()) - new Date(fromIso)) / 1000;
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
  return `${Math.floor(seconds / 3600)} h ${Math.round((seconds % 3600) / 60)} min`;
}

const STATE_SYMBOLS = {
  queued: '◷',
  running: '▶',
  succeeded: '✓',
  failed: '✗',
  cancelled: '⊘',
};

// A state is said in words with a symbol; the colour only repeats it.
export function stateBadge(state, cancelRequested = false) {
  const text = cancelRequested && !isTerminal(state) ? `${state} (cancelling)` : state;
  return h('span', { class: `badge state-${state}`, 'data-state': state },
    h('span', { 'aria-hidden': 'true' }, STATE_SYMBOLS[state] ?? '•'), ` ${text}`);
}

export function progressBar(job) {
  const bar = h('progress', { class: 'progress', max: 1, value: 0 });
  const label = h('span', { class: 'progress-label' });
  const wrap = h('span', { class: 'progress-wrap' }, bar, label);
  updateProgress(wrap, job);
  return wrap;
}

export function updateProgress(wrap, job) {
  const [bar, label] = wrap.children;
  const progress = job.progress;
  let fraction = 0;
  let text = job.state === 'queued' ? 'waiting' : '';
  if (progress && progress.total) {
    fraction = progress.done / progress.total;
    text = `${progress.done}/${progress.total} ${progress.unit ?? ''}`.trim();
  }
  if (job.state === 'succeeded') fraction = 1;
  bar.max = 1;
  bar.value = fraction;
  bar.dataset.value = fraction.toFixed(3);
  bar.setAttribute('aria-label', `progress of job ${shortId(job.id)}: ${text || 'none'}`);
  label.textContent = text;
}

export function copyButton(text, label = 'Copy') {
  return h('button', {
    type: 'button',
    class: 'small',
    'aria-label': `${label} ${text}`,
    onclick: async (event) => {
      const button = event.currentTarget;
      try {
        await navigator.clipboard.writeText(text);
        button.textContent = 'Copied';
      } catch {
        window.prompt('Copy:', text); // no clipboard outside a secure context
      }
    },
  }, label);
}

export function definitionList(entries) {
  return h('dl', { class: 'pairs' }, entries.flatMap(([term, value]) => [
    h('dt', {}, term), h('dd', {}, value ?? '–'),
  ]));
}

export function empty(text) {
  return h('p', { class: 'empty' }, text);
}
