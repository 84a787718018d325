// Models: the registry (name, task, classes, size, short copyable sha256, variants, lineage)
// and an import form (upload of a .pt). `#/models/<id>` marks one model's row (a training's link
// to the model it registered).
import { getJson, request } from '../api.js';
import { copyButton, definitionList, empty, fmtBytes, fmtTime, h, section } from '../dom.js';
import { showStatus } from '../status.js';

export function renderModels(main, selectedId = null) {
  const body = h('tbody', {});
  const table = h('div', { class: 'scroll' }, h('table', { class: 'models' },
    h('thead', {}, h('tr', {}, ['Name', 'Task', 'Classes', 'Size', 'sha256', 'Source', 'Imported', 'Variants'].map((t) => h('th', { scope: 'col' }, t)))),
    body));
  const file = h('input', { type: 'file', id: 'model-file', name: 'file', accept: '.pt', required: true });
  const name = h('input', { type: 'text', id: 'model-name', name: 'name', placeholder: 'from the file name' });
  const form = h('form', { class: 'import', id: 'import-form' },
    h('label', { for: 'model-file' }, 'Weights (.pt) ', file),
    h('label', { for: 'model-name' }, 'Name ', name),
    h('button', { type: 'submit' }, 'Import'));
  main.append(h('h1', {}, 'Models'), section('Registry', table), section('Import weights', form));

  async function load() {
    try {
      const { models } = await getJson('/v1/models');
      body.replaceChildren(...models.map(modelRow));
      const selected = selectedId && [...body.children].find((tr) => tr.dataset.model === selectedId);
      if (selected) {
        selected.setAttribute('aria-current', 'true');
        selected.scrollIntoView({ block: 'center' });
      } else if (selectedId) {
        showStatus(`model ${selectedId} is not in the registry (deleted?)`, 'note');
      }
      if (!models.length) body.append(h('tr', {}, h('td', { colspan: 8 }, empty('No models imported yet.'))));
    } catch (error) {
      body.replaceChildren(h('tr', {}, h('td', { colspan: 8 }, empty(`Could not list models: ${error.message}`))));
    }
  }

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const data = new FormData();
    data.append('file', file.files[0]);
    if (name.value.trim()) data.append('name', name.value.trim());
    try {
      const response = await request('/v1/models', { method: 'POST', body: data });
      const model = await response.json();
      showStatus(`imported ${model.name} (${model.task}, ${model.class_names.length} classes)`, 'note');
      form.reset();
      load();
    } catch (error) {
      if (error.status !== 401 && error.status !== 403) showStatus(`import refused: ${error.message}`);
    }
  });
  load();
}

function modelRow(model) {
  const details = h('td', {}, h('button', {
    type: 'button',
    class: 'small',
    'aria-expanded': 'false',
    onclick: async (event) => {
      const button = event.currentTarget;
      const row = button.closest('tr');
      if (row.nextElementSibling?.classList.contains('variants')) {
        row.nextElementSibling.remove();
        button.setAttribute('aria-expanded', 'false');
        return;
      }
      button.setAttribute('aria-expanded', 'true');
      const detail = await getJson(`/v1/models/${model.id}`);
      row.after(h('tr', { class: 'variants' }, h('td', { colspan: 8 }, variants(detail))));
    },
  }, 'Show'));
  return h('tr', { 'data-model': model.id },
    h('td', {}, model.name, model.usable ? '' : h('span', { class: 'badge state-failed' }, ' ✗ unusable')),
    h('td', {}, model.task),
    h('td', {}, String(model.class_names.length)),
    h('td', {}, fmtBytes(model.size_bytes)),
    h('td', {}, h('code', { title: model.sha256 }, model.sha256.slice(0, 12)), ' ', copyButton(model.sha256)),
    h('td', {}, model.source),
    h('td', {}, fmtTime(model.created_at)),
    details);
}

function variants(detail) {
  const classes = detail.class_names.length > 20
    ? `${detail.class_names.slice(0, 20).join(', ')} …`
    : detail.class_names.join(', ');
  const box = h('div', {}, definitionList([['classes', classes], ['id', h('code', {}, detail.id)]]));
  if (!detail.variants.length) return append(box, empty('No exported variants.'));
  box.append(h('ul', {}, detail.variants.map((v) => h('li', {},
    h('strong', {}, v.format), ` ${fmtBytes(v.size_bytes)} · `,
    h('code', { title: v.sha256 }, v.sha256.slice(0, 12)), ' · from ',
    v.lineage.source_sha256 ? h('code', {}, v.lineage.source_sha256.slice(0, 12)) : 'an import',
    ` · imgsz ${v.lineage.imgsz}${v.lineage.half ? ' · half' : ''}${v.lineage.int8 ? ' · int8' : ''}`,
    v.usable ? '' : ' · ✗ unusable'))));
  return box;
}

function append(el, child) {
  el.append(child);
  return el;
}
