// Submit: a job of any kind, from a form built from the server's own schemas: the kinds and
// their params from GET /v1/meta (defaults, bounds, choices), the request's other fields from
// the API's description (/openapi.json), the models from GET /v1/models. A field whose
// description names the data roots gets a picker over them (GET /v1/data-files). Inference may
// also run on images dropped onto the page, watched here; any other submission opens the job's
// page. A refusal's detail is shown beside the field it names. `#/submit?kind=..&model=..`
// preselects.
import { follow, getJson, request } from '../api.js';
import { h, progressBar, section, shortId, stateBadge, updateProgress } from '../dom.js';
import { isTerminal, kindMeta, meta } from '../meta.js';
import { showStatus } from '../status.js';
import { withPicker } from './file_picker.js';
import { nestedFields, paramFields, schemaFields } from './params.js';
import { inferenceResults } from './results.js';

const UPLOAD_KIND = 'inference'; // the kind with an upload route of its own
const UPLOAD_PATH = '/v1/jobs/inference';
const DATA_ROOT_FIELD = /data root/i; // a field that names files under the data roots

// The request body's schema of each kind, and the fields every kind's body has.
function requestSchemas(openapi) {
  const body = openapi?.paths?.['/v1/jobs']?.post?.requestBody?.content?.['application/json']?.schema;
  const mapping = body?.discriminator?.mapping ?? {};
  const schemas = Object.fromEntries(Object.entries(mapping).map(([kind, ref]) => [kind,
    ref.replace(/^#\//, '').split('/').reduce((node, key) => node?.[key], openapi)]));
  const names = Object.values(schemas).map((schema) => Object.keys(schema?.properties ?? {}));
  const common = names.length ? names.reduce((all, these) => all.filter((n) => these.includes(n))) : [];
  return { schemas, common };
}

function hashQuery() {
  return new URLSearchParams(window.location.hash.split('?')[1] ?? '');
}

export function renderSubmit(main) {
  const controller = new AbortController();
  const query = hashQuery();
  const kinds = meta().kinds.map((entry) => entry.kind);
  const wanted = query.get('kind');
  const kindSelect = h('select', { id: 'kind', name: 'kind' }, kinds.map((k) => h('option', { value: k }, k)));
  kindSelect.value = kinds.includes(wanted) ? wanted : (kinds.includes(UPLOAD_KIND) ? UPLOAD_KIND : kinds[0]);
  const model = h('select', { id: 'model', name: 'model', required: true });
  const modelLabel = h('label', { for: 'model' }, 'Model ', model);
  const body = h('div', { id: 'kind-form', class: 'kind-form' });
  const problem = h('p', { class: 'field-error', id: 'submit-error', role: 'alert', hidden: true });
  const button = h('button', { type: 'submit' }, 'Submit');
  const form = h('form', { class: 'submit', id: 'submit-form' },
    h('label', { for: 'kind' }, 'Kind ', kindSelect), modelLabel, body, problem, button);
  const watch = h('div', { id: 'watch' });
  const title = h('h2', {}, 'A job');
  main.append(h('h1', {}, 'Submit'), h('section', { class: 'card' }, title, form), watch);

  let registry = [];
  let openapi = null;
  let current = null; // the kind's form: its readers and fields

  const fillModels = () => {
    const kind = kindSelect.value;
    const usable = registry.filter((m) => m.usable).map((m) => m.name);
    const names = [...new Set([...(kindMeta(kind)?.runtime_models ?? []), ...usable])];
    const keep = model.value || query.get('model');
    if (keep && !names.includes(keep)) names.unshift(keep);
    model.replaceChildren(...names.map((n) => h('option', { value: n }, n)));
    if (!names.length) model.append(h('option', { value: '' }, 'no model: import one first'));
    if (keep) model.value = keep;
  };

  const build = () => {
    const kind = kindSelect.value;
    const params = kindMeta(kind).params;
    const { schemas, common } = requestSchemas(openapi);
    const create = schemas[kind];
    const skip = ['kind', 'model', 'params'];
    const own = create ? Object.keys(create.properties ?? {}).filter((n) => !skip.includes(n) && !common.includes(n)) : [];
    const shared = common.filter((n) => !skip.includes(n));
    const top = create ? schemaFields(create, openapi, { prefix: 'job', only: own }) : schemaFields({}, {});
    const options = create ? schemaFields(create, openapi, { prefix: 'job', only: shared }) : schemaFields({}, {});
    for (const f of top.fields) {
      const described = create.properties[f.name]?.description ?? '';
      if (DATA_ROOT_FIELD.test(described) && f.input.tagName !== 'SELECT') withPicker(f.label, f.input);
    }
    const simple = paramFields(params);
    const nested = nestedFields(params);
    const extra = h('input', { type: 'text', id: 'extra', name: 'extra', placeholder: '{"param": value, ...}', spellcheck: 'false' });
    const parts = [];
    let upload = null;
    if (kind === UPLOAD_KIND) {
      upload = uploads();
      parts.push(upload.drop, upload.chosen);
    }
    if (top.labels.length) parts.push(h('div', { class: 'param-grid job-fields', id: 'job-fields' }, top.labels));
    parts.push(
      h('fieldset', { class: 'params', id: 'params' }, h('legend', {}, 'Parameters (empty: the server\'s default)'),
        h('div', { class: 'param-grid' }, simple.labels)),
    );
    if (nested.labels.length) {
      parts.push(h('details', { class: 'params', id: 'params-more' }, h('summary', {}, 'Nested settings and lists'),
        h('div', { class: 'param-grid' }, nested.labels)));
    }
    parts.push(h('label', { for: 'extra' }, 'More params (JSON) ', extra));
    if (options.labels.length) {
      parts.push(h('details', { class: 'params', id: 'job-options' }, h('summary', {}, 'Job options'),
        h('div', { class: 'param-grid' }, options.labels)));
    }
    body.replaceChildren(...parts);
    title.textContent = kind === UPLOAD_KIND ? 'Inference on your images, or on files under the data roots' : `A ${kind} job`;
    button.textContent = kind === UPLOAD_KIND ? 'Run inference' : `Submit the ${kind} job`;
    current = { kind, top, options, simple, nested, extra, upload, fields: [...top.fields, ...options.fields] };
    fillModels();
  };

  const clearErrors = () => {
    form.querySelectorAll('.field-error[data-error-for]').forEach((el) => el.remove());
    form.querySelectorAll('[aria-invalid]').forEach((el) => el.removeAttribute('aria-invalid'));
    problem.hidden = true;
  };

  // Shows `text` beside the field `control` (the general line when there is none).
  const fieldError = (control, text) => {
    if (!control) {
      problem.textContent = text;
      problem.hidden = false;
      return;
    }
    control.setAttribute('aria-invalid', 'true');
    for (let box = control.closest('details'); box; box = box.parentElement?.closest('details')) box.open = true;
    const place = control.closest('label') ?? control;
    place.after(h('p', { class: 'field-error', 'data-error-for': control.id, role: 'alert' }, text));
  };

  // The field a problem's `errors[].loc` names: the longest prefix that is a field of the form.
  const fieldAt = (loc, kind) => {
    const path = loc.filter((part) => part !== 'body' && part !== kind).map(String);
    const [head, ...rest] = path;
    const names = head === 'params' ? rest : path;
    const prefix = head === 'params' ? 'param' : 'job';
    for (let n = names.length; n > 0; n -= 1) {
      const found = document.getElementById(`${prefix}-${names.filter((_, i) => i < n).join('-')}`);
      if (found && form.contains(found)) return found;
      if (head !== 'params' && n === 1 && names[0] === 'model') return model;
    }
    return null;
  };

  // A problem without `errors`: its code says which field when it is about a model or a path.
  const fieldOfCode = (code = '') => {
    if (/model|variant|alias/.test(code)) return model;
    if (/dataset|path|input|data_roots|no_inputs|too_many_files|task_mismatch/.test(code)) {
      return current.fields.map((f) => f.input).find((input) => input.nextElementSibling?.classList.contains('browse')) ?? null;
    }
    return null;
  };

  const showProblem = (error) => {
    const answer = error.problem;
    const detail = answer?.detail ?? error.message;
    const placed = (answer?.errors ?? []).filter((e) => Array.isArray(e.loc));
    if (placed.length) {
      for (const e of placed) fieldError(fieldAt(e.loc, current.kind), e.msg ?? detail);
      if (!placed.some((e) => fieldAt(e.loc, current.kind))) fieldError(null, detail);
    } else {
      fieldError(fieldOfCode(answer?.code), answer?.code ? `${answer.code}: ${detail}` : detail);
    }
    showStatus(`refused: ${error.message}`);
  };

  const read = () => {
    let given = {};
    const extra = current.extra.value.trim();
    if (extra) {
      try {
        given = JSON.parse(extra);
      } catch {
        throw Object.assign(new Error('More params is not a JSON object'), { field: current.extra });
      }
    }
    return {
      top: current.top.read(),
      options: current.options.read(),
      params: { ...given, ...current.nested.read(), ...current.simple.read() },
    };
  };

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (!current) return;
    clearErrors();
    let values;
    try {
      values = read();
    } catch (failure) {
      fieldError(failure.field ?? null, failure.message);
      return showStatus(failure.message);
    }
    const { kind, upload } = current;
    try {
      if (upload?.picked().length) {
        const data = new FormData();
        data.append('model', model.value);
        data.append('params', JSON.stringify(values.params));
        for (const file of upload.picked()) data.append('images', file, file.name);
        const job = await (await request(UPLOAD_PATH, { method: 'POST', body: data })).json();
        showStatus('');
        watchJob(watch, job, controller.signal);
        return;
      }
      if (upload && !values.top.inputs) return showStatus('choose or drop at least one image, or name files under the data roots');
      const sent = { kind, model: model.value, ...values.options, ...values.top, params: values.params };
      const job = await (await request('/v1/jobs', { method: 'POST', json: sent })).json();
      showStatus('');
      window.location.hash = `#/jobs/${job.id}`;
    } catch (error) {
      if (error.status !== 401 && error.status !== 403) showProblem(error);
    }
  });
  kindSelect.addEventListener('change', () => {
    clearErrors();
    if (ready) build();
  });

  const models = getJson('/v1/models').then(({ models: list }) => { registry = list; }).catch(() => {});
  const described = getJson('/openapi.json').then((document) => { openapi = document; })
    .catch((error) => showStatus(`cannot read the API's description (/openapi.json): ${error.message}`));
  let ready = false; // drawn once the models and the API's description are read
  body.append(h('p', { class: 'muted' }, 'Reading the server\'s schemas…'));
  Promise.all([models, described]).then(() => {
    if (controller.signal.aborted) return;
    ready = true;
    build();
  });
  return () => controller.abort();
}

// The drop zone and file field of an inference on uploaded images.
function uploads() {
  const files = h('input', { type: 'file', id: 'images', name: 'images', multiple: true, accept: 'image/*' });
  const drop = h('label', { class: 'drop', for: 'images', id: 'drop' },
    h('span', {}, 'Drop images here, or choose them: '), files);
  const chosen = h('p', { class: 'muted', id: 'chosen' }, 'No images chosen.');
  let picked = [];
  const pick = (list) => {
    picked = [...list].filter((f) => f.type.startsWith('image/') || /\.(jpe?g|png|bmp|webp|tiff?)$/i.test(f.name));
    chosen.textContent = picked.length ? `${picked.length} image(s): ${picked.map((f) => f.name).join(', ')}` : 'No images chosen.';
  };
  files.addEventListener('change', () => pick(files.files));
  for (const name of ['dragenter', 'dragover']) {
    drop.addEventListener(name, (event) => {
      event.preventDefault();
      drop.classList.add('over');
    });
  }
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (event) => {
    event.preventDefault();
    drop.classList.remove('over');
    pick(event.dataTransfer.files);
  });
  return { drop, chosen, picked: () => picked };
}

function watchJob(box, job, signal) {
  const badge = h('span', {}, stateBadge(job.state));
  const bar = progressBar(job);
  const results = h('div', {});
  box.replaceChildren(section(`Job ${shortId(job.id)}`,
    h('p', {}, badge, ' ', bar, ' ', h('a', { href: `#/jobs/${job.id}` }, 'Open the job page')), results));
  follow(`/v1/jobs/${job.id}/events`, {
    signal,
    endless: false,
    onEvent: (_type, current) => {
      badge.replaceChildren(stateBadge(current.state, current.cancel_requested));
      updateProgress(bar, current);
      if (current.state === 'succeeded') results.replaceChildren(inferenceResults(job.id));
      else if (isTerminal(current.state) && current.error) results.replaceChildren(h('p', {}, `${current.error.code}: ${current.error.message}`));
    },
  });
}
