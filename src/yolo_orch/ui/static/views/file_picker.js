// A picker over the server's data roots (GET /v1/data-files): one folder at a time, a page at a
// time, folders to open and files to choose. It shows what the server lists, under the rules a
// submission's paths follow; what is chosen is the path under its root, as a submission names it.
import { getJson } from '../api.js';
import { fmtBytes, h } from '../dom.js';

const PAGE = 100;

// A panel that lists the data roots' folders; `onPick(path)` gets the chosen file's path (or,
// with a folder open, that folder's: "Use this folder").
export function filePicker({ id = 'file-picker', onPick, onClose }) {
  const roots = h('select', { id: `${id}-root`, 'aria-label': 'Data root' });
  const where = h('span', { class: 'picker-path', id: `${id}-path` });
  const list = h('ul', { class: 'picker-list', id: `${id}-list` });
  const more = h('button', { type: 'button', id: `${id}-more`, hidden: true }, 'More');
  const up = h('button', { type: 'button', id: `${id}-up` }, 'Up');
  const useFolder = h('button', { type: 'button', id: `${id}-use-folder` }, 'Use this folder');
  const close = h('button', { type: 'button', id: `${id}-close` }, 'Close');
  const error = h('p', { class: 'field-error', id: `${id}-error`, hidden: true });
  const panel = h('div', { class: 'file-picker', id, role: 'dialog', 'aria-label': 'Choose a file under the data roots' },
    h('div', { class: 'picker-bar' }, roots, ' ', up, ' ', where, ' ', useFolder, ' ', close),
    error, list, more);
  let root = '0';
  let path = '';
  let turn = 0;

  const joined = (name) => (path ? `${path}/${name}` : name);

  const row = (entry) => {
    const item = h('li', { 'data-kind': entry.kind, 'data-name': entry.name });
    if (entry.kind === 'dir') {
      item.append(h('button', { type: 'button', class: 'picker-dir', onclick: () => open(joined(entry.name)) }, `${entry.name}/`));
    } else {
      item.append(h('button', { type: 'button', class: 'picker-file', onclick: () => onPick(joined(entry.name)) }, entry.name),
        h('span', { class: 'muted' }, ` ${fmtBytes(entry.size)}`));
    }
    return item;
  };

  async function load(offset) {
    const mine = ++turn;
    const query = new URLSearchParams({ root, path, offset: String(offset), limit: String(PAGE) });
    try {
      const page = await getJson(`/v1/data-files?${query}`);
      if (mine !== turn) return;
      error.hidden = true;
      if (!roots.options.length) {
        roots.replaceChildren(...page.roots.map((r) => h('option', { value: String(r.index) }, r.name)));
      }
      roots.value = String(page.root);
      where.textContent = `/${page.path}`;
      if (offset === 0) list.replaceChildren();
      list.append(...page.entries.map(row));
      if (!page.total) list.replaceChildren(h('li', { class: 'muted' }, 'Empty folder.'));
      more.hidden = page.next_offset === null;
      more.onclick = () => load(page.next_offset);
      up.disabled = !page.path;
      useFolder.disabled = !page.path;
    } catch (failure) {
      if (mine !== turn) return;
      error.textContent = failure.problem?.detail ?? failure.message;
      error.hidden = false;
    }
  }

  function open(folder) {
    path = folder;
    load(0);
  }

  roots.addEventListener('change', () => {
    root = roots.value;
    open('');
  });
  up.addEventListener('click', () => open(path.replace(/\/?[^/]*$/, '')));
  useFolder.addEventListener('click', () => onPick(path));
  close.addEventListener('click', () => onClose?.());
  open('');
  return panel;
}

// A "Browse" button beside `input` (a text field, or a textarea of one path a line) that opens
// the picker below `label`; a chosen path fills the field (or adds a line).
export function withPicker(label, input) {
  const button = h('button', { type: 'button', class: 'browse', id: `${input.id}-browse` }, 'Browse…');
  let panel = null;
  const shut = () => {
    panel?.remove();
    panel = null;
  };
  button.addEventListener('click', () => {
    if (panel) return shut();
    panel = filePicker({
      id: `${input.id}-picker`,
      onPick: (path) => {
        if (input.tagName === 'TEXTAREA') input.value = [input.value.trim(), path].filter(Boolean).join('\n');
        else input.value = path;
        input.dispatchEvent(new Event('input', { bubbles: true }));
        shut();
      },
      onClose: shut,
    });
    label.after(panel);
  });
  label.append(button);
}
