// Models: the registry (name, task, classes, size, short copyable sha256, variants, lineage),
// every alias and where it points, and an import form (upload of a .pt). `#/models/<ref>` (an id,
// a name or name@alias) is one model's page (model_page.js).
import { getJson, request } from '../api.js';
import { copyButton, definitionList, empty, fmtBytes, fmtTime, h, section, shortId } from '../dom.js';
import { showStatus } from '../status.js';
import { renderModelPage } from './model_page.js';

export function renderModels(main, ref = null) {
  if (ref) return renderModelPage(main, decodeURIComponent(ref));
  return renderRegistry(main);
}

function renderRegistry(main) {
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
  const aliases = h('div', { class: 'aliases' });
  main.append(h('h1', {}, 'Models'), section('Registry', table), section('Aliases', aliases), section('Import weights', form));

  async function load() {
    try {
      const { models } = await getJson('/v1/models');
      body.replaceChildren(...models.map(modelRow));
      loadAliases(aliases, models);
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
    h('td', {}, h('a', { href: `#/models/${encodeURIComponent(model.name)}`, class: 'model-link' }, model.name), model.usable ? '' : h('span', { class: 'badge state-failed' }, ' ✗ unusable')),
    h('td', {}, model.task),
    h('td', {}, String(model.class_names.length)),
    h('td', {}, fmtBytes(model.size_bytes)),
    h('td', {}, h('code', { title: model.sha256 }, model.sha256.slice(0, 12)), ' ', copyButton(model.sha256)),
    h('td', {}, model.source),
    h('td', {}, fmtTime(model.created_at)),
    details);
}

// Every alias: `name@alias`, the model it points to, who moved it last and when.
async function loadAliases(box, models) {
  try {
    const { aliases } = await getJson('/v1/aliases');
    if (!aliases.length) {
      box.replaceChildren(empty('No aliases yet: a model’s page points one to it.'));
      return;
    }
    box.replaceChildren(h('div', { class: 'scroll' }, h('table', { class: 'table alias-list' },
      h('thead', {}, h('tr', {}, ...['alias', 'points to', 'moved by', 'when'].map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, ...aliases.map((alias) => {
        const target = models.find((m) => m.id === alias.model_id);
        return h('tr', { 'data-alias': alias.ref },
          h('td', {}, h('code', {}, alias.ref)),
          h('td', {}, h('a', { href: `#/models/${encodeURIComponent(alias.model_id)}`, class: 'mono' },
            target ? `${target.name} (${shortId(alias.model_id)})` : shortId(alias.model_id))),
          h('td', {}, alias.updated_by),
          h('td', {}, fmtTime(alias.updated_at)));
      })))));
  } catch (error) {
    box.replaceChildren(empty(`Could not list the aliases: ${error.message}`));
  }
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
