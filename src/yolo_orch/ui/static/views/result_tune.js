// A tune job's result: its trials (the params each trained with, the objective it reached, its
// state, the epoch it was pruned after, its training job and model), the best trial marked, and
// a scatter of one searched param (picked with a select) against the objective.
import { getJson } from '../api.js';
import { definitionList, empty, h, section, shortId } from '../dom.js';

// The first state's points filled, the next's hollow: they differ without colour too.
const SERIES = [
  { stroke: '#2563eb', fill: '#2563eb', size: 9 },
  { stroke: '#d97706', fill: 'transparent', size: 9 },
  { stroke: '#7c3aed', fill: 'transparent', size: 5 },
];

export async function tuneResult(jobId) {
  const result = await getJson(`/v1/jobs/${jobId}/result`);
  const trials = result.trials ?? [];
  const names = paramNames(trials);
  const best = result.best?.number ?? null;
  const box = section('Tune', definitionList([
    ['objective', result.objective],
    ['trials', trials.length],
    ['by state', Object.entries(countBy(trials, (t) => t.state)).map(([s, n]) => `${s}: ${n}`).join(', ') || '–'],
    ['best', result.best ? bestLine(result.best, result.objective) : 'none complete'],
  ]));
  box.append(h('h3', {}, 'Trials'), trials.length ? trialTable(trials, names, result.objective, best) : empty('No trials.'));
  const numeric = names.filter((n) => trials.some((t) => typeof t.params[n] === 'number'));
  let chart = null;
  if (numeric.length) {
    const select = h('select', { id: 'tune-param', 'aria-label': 'Param to plot against the objective' },
      numeric.map((n) => h('option', { value: n }, n)));
    const el = h('div', { class: 'chart', id: 'tune-scatter' });
    box.append(h('h3', {}, 'Param against objective'), h('label', {}, 'param ', select), el);
    const draw = () => {
      chart?.destroy();
      chart = scatter(el, trials, select.value, result.objective, best);
    };
    select.addEventListener('change', draw);
    // Drawn once in the page: uPlot takes its width from the element.
    requestAnimationFrame(draw);
  }
  box.dispose = () => chart?.destroy();
  return box;
}

function countBy(items, key) {
  const counts = {};
  for (const item of items) counts[key(item)] = (counts[key(item)] ?? 0) + 1;
  return counts;
}

function paramNames(trials) {
  const names = [];
  for (const t of trials) for (const k of Object.keys(t.params ?? {})) if (!names.includes(k)) names.push(k);
  return names;
}

function fmt(v) {
  if (v === null || v === undefined) return '–';
  if (typeof v === 'number') return Number.isInteger(v) ? String(v) : v.toPrecision(4);
  return String(v);
}

function modelLink(trial) {
  return trial.model_id
    ? h('a', { href: `#/models/${encodeURIComponent(trial.model_id)}` }, shortId(trial.model_id))
    : '–';
}

function bestLine(trial, objective) {
  return h('span', {}, `trial ${trial.number}, ${objective} ${fmt(trial.value)}; model `, modelLink(trial));
}

function trialTable(trials, names, objective, best) {
  return h('div', { class: 'scroll' }, h('table', { class: 'trials' },
    h('thead', {}, h('tr', {},
      h('th', { scope: 'col' }, 'Trial'),
      names.map((n) => h('th', { scope: 'col' }, n)),
      [objective, 'State', 'Pruned after epoch', 'Job', 'Model'].map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, trials.map((t) => h('tr', {
      'data-trial': t.number,
      'data-state': t.state,
      class: t.number === best ? 'best' : null,
      'aria-current': t.number === best ? 'true' : null,
    },
    h('th', { scope: 'row' }, t.number === best ? `★ ${t.number} (best)` : String(t.number)),
    names.map((n) => h('td', {}, fmt(t.params[n]))),
    h('td', {}, fmt(t.value)),
    h('td', {}, t.state),
    h('td', {}, fmt(t.pruned_at_epoch)),
    h('td', {}, h('a', { href: `#/jobs/${t.job_id}` }, shortId(t.job_id))),
    h('td', {}, modelLink(t)))))));
}

// Points only, a series per state (a pruned trial's value is its last epoch's); failed and
// cancelled trials have no value to plot.
function scatter(el, trials, param, objective, best) {
  const plotted = trials
    .filter((t) => typeof t.params[param] === 'number' && t.value !== null && t.value !== undefined)
    .sort((a, b) => a.params[param] - b.params[param]);
  const xs = plotted.map((t) => t.params[param]);
  // A series per state the plotted trials ended in (those with a value: complete, pruned).
  const states = [...new Set(trials.filter((t) => t.value !== null && t.value !== undefined).map((t) => t.state))];
  const height = 260;
  // A param searched over decades (a log range, as lr0's) on a log axis.
  const logX = xs.length > 1 && xs[0] > 0 && xs[xs.length - 1] / xs[0] >= 10;
  const options = {
    title: `${objective} by ${param}${logX ? ' (log scale)' : ''}`,
    width: Math.max(260, el.clientWidth || 600),
    height,
    scales: { x: logX ? { time: false, distr: 3 } : { time: false } },
    axes: [{ label: param }, { label: objective }],
    series: [
      { label: param },
      ...states.map((state, i) => {
        const look = SERIES[i % SERIES.length];
        return {
          label: state,
          stroke: look.stroke,
          width: 0,
          paths: () => null,
          points: { show: true, size: look.size, fill: look.fill, width: 2 },
        };
      }),
    ],
  };
  const data = [xs, ...states.map((state) => plotted.map((t) => (t.state === state ? t.value : null)))];
  const chart = new window.uPlot(options, data, el);
  el.dataset.param = param;
  el.dataset.points = String(plotted.length);
  el.dataset.best = best === null ? '' : String(best);
  const resize = new ResizeObserver(() => chart.setSize({ width: Math.max(260, el.clientWidth), height }));
  resize.observe(el);
  return { destroy() { resize.disconnect(); chart.destroy(); } };
}
