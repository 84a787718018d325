// Jobs: a list, newest first by creation, with state, kind, id and model filters and cursor
// paging; live progress, cancel and delete. Live updates change rows in place and put a job the
// list did not show yet where its creation time places it, so the order never changes.
import { getJson } from '../api.js';
import { empty, fmtDuration, fmtTime, h, progressBar, section, shortId, stateBadge, updateProgress } from '../dom.js';
import { onLive } from '../live.js';
import { isTerminal, meta } from '../meta.js';
import { jobActions } from './actions.js';

const PAGE = 20;
const COLUMNS = ['Job', 'Kind', 'State', 'Model', 'Dataset', 'Progress', 'Created', 'Duration', 'Produced', 'Error', 'Actions'];
const TYPING_PAUSE_MS = 300; // a search is sent once the typing stops, not at every key

export function renderJobs(main) {
  const stateSelect = select('filter-state', 'State', meta().states);
  const kindSelect = select('filter-kind', 'Kind', meta().kinds.map((entry) => entry.kind));
  // The id's characters as the API accepts them: a prefix it would refuse is not sent.
  const idInput = h('input', { id: 'filter-id', type: 'search', placeholder: 'id prefix', pattern: '[A-Za-z0-9_\\-]+', maxlength: 64, spellcheck: 'false', autocomplete: 'off' });
  const modelInput = h('input', { id: 'filter-model', type: 'search', placeholder: 'exact name', spellcheck: 'false', autocomplete: 'off' });
  const body = h('tbody', {});
  const more = h('button', { type: 'button', id: 'older', hidden: true }, 'Older jobs');
  const table = h('div', { class: 'scroll' }, h('table', { class: 'jobs' },
    h('thead', {}, h('tr', {}, COLUMNS.map((t) => h('th', { scope: 'col' }, t)))),
    body));
  const filters = h('form', { class: 'filters', role: 'search' }, stateSelect.label, kindSelect.label,
    h('label', { for: 'filter-id' }, 'Id ', idInput), h('label', { for: 'filter-model' }, 'Model ', modelInput));
  filters.addEventListener('submit', (event) => event.preventDefault());
  main.append(h('h1', {}, 'Jobs'), section('Jobs', filters, table, more));
  let cursor = null;
  let loading = 0; // which call of `load` may still fill the list: a later one wins

  const wanted = () => ({
    state: stateSelect.input.value,
    kind: kindSelect.input.value,
    id_prefix: idInput.validity.valid ? idInput.value.trim() : '',
    model: modelInput.value.trim(),
  });
  const query = () => {
    const params = new URLSearchParams({ limit: String(PAGE) });
    for (const [name, value] of Object.entries(wanted())) if (value) params.append(name, value);
    if (cursor) params.set('cursor', cursor);
    return `/v1/jobs?${params}`;
  };
  // What the API's filter selects (JobFilter.matches), said of a job the stream brings.
  const matches = (job) => {
    const want = wanted();
    return (!want.state || job.state === want.state) && (!want.kind || job.kind === want.kind)
      && (!want.id_prefix || job.id.startsWith(want.id_prefix)) && (!want.model || job.model === want.model);
  };

  async function load(reset) {
    const turn = ++loading;
    if (reset) cursor = null;
    try {
      const page = await getJson(query());
      if (turn !== loading) return;
      if (reset) body.replaceChildren();
      // A job the stream showed while this page was on its way is already listed.
      const fresh = page.jobs.filter((job) => !rowOf(body, job.id));
      body.querySelector('tr.none')?.remove();
      body.append(...fresh.map(row));
      cursor = page.next_cursor;
      more.hidden = !cursor;
      if (!body.children.length) body.append(h('tr', { class: 'none' }, h('td', { colspan: COLUMNS.length }, empty('No jobs.'))));
    } catch (error) {
      if (turn !== loading) return;
      body.replaceChildren(h('tr', {}, h('td', { colspan: COLUMNS.length }, empty(`Could not list jobs: ${error.message}`))));
    }
  }

  // A job the list does not show goes where its creation time puts it among the rows; one
  // older than every row while older pages remain belongs to a page not read yet.
  function place(job) {
    const key = createdKey(job.created_at);
    const after = [...body.querySelectorAll('tr[data-job]')].find((tr) => tr.dataset.created < key);
    if (!after && cursor) return;
    body.querySelector('tr.none')?.remove();
    body.insertBefore(row(job), after ?? null);
  }

  let typing = null;
  const searchLater = () => {
    clearTimeout(typing);
    typing = setTimeout(() => load(true), TYPING_PAUSE_MS);
  };
  more.addEventListener('click', () => load(false));
  for (const { input } of [stateSelect, kindSelect]) input.addEventListener('change', () => load(true));
  for (const input of [idInput, modelInput]) input.addEventListener('input', searchLater);

  const stop = onLive((type, job) => {
    if (type === 'resync') return load(true);
    if (type === 'deleted') return rowOf(body, job.id)?.remove();
    const existing = rowOf(body, job.id);
    if (existing && !matches(job)) return existing.remove();
    if (existing) return updateRow(existing, job);
    if (matches(job)) place(job);
  });
  load(true);
  return () => {
    stop();
    clearTimeout(typing);
  };
}

function rowOf(body, id) {
  return body.querySelector(`tr[data-job="${CSS.escape(id)}"]`);
}

// The creation time as text that sorts as the time does: the API writes the fraction of a
// second with up to six digits, and none at all when it is zero.
export function createdKey(iso) {
  const match = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(.*)$/.exec(iso ?? '');
  if (!match) return iso ?? '';
  const utc = new Date(`${match[1]}${match[3]}`).toISOString().slice(0, 19);
  return `${utc}.${(match[2] ?? '').padEnd(6, '0').slice(0, 6)}`;
}

function select(id, labelText, values) {
  const input = h('select', { id, name: id },
    h('option', { value: '' }, 'any'), values.map((v) => h('option', { value: v }, v)));
  return { input, label: h('label', { for: id }, `${labelText} `, input) };
}

function row(job) {
  const tr = h('tr', { 'data-job': job.id, 'data-state': job.state, 'data-created': createdKey(job.created_at) });
  fill(tr, job);
  return tr;
}

// The model a job registered (a training) or the one whose variant it made (an export).
function producedModel(job) {
  const id = job.kind === 'training' || job.kind === 'export' ? job.result?.model_id : null;
  return id ? h('a', { href: `#/models/${encodeURIComponent(id)}`, class: 'mono produced' }, shortId(id)) : '–';
}

function fill(tr, job) {
  tr.replaceChildren(
    h('td', {}, h('a', { href: `#/jobs/${job.id}`, class: 'mono' }, shortId(job.id))),
    h('td', {}, job.kind),
    h('td', { class: 'state' }, stateBadge(job.state, job.cancel_requested)),
    h('td', { class: 'model' }, job.model),
    h('td', { class: 'dataset' }, job.dataset ?? '–'),
    h('td', { class: 'progress-cell' }, progressBar(job)),
    h('td', {}, fmtTime(job.created_at)),
    h('td', { class: 'duration' }, job.started_at ? fmtDuration(job.started_at, job.finished_at) : '–'),
    h('td', { class: 'produced-cell' }, producedModel(job)),
    h('td', { class: 'error-code' }, job.error ? h('span', { class: 'mono', title: job.error.message }, job.error.code) : '–'),
    h('td', { class: 'actions' }, jobActions(job)),
  );
}

function updateRow(tr, job) {
  if (tr.dataset.state === job.state && !isTerminal(job.state)) {
    updateProgress(tr.querySelector('.progress-wrap'), job);
    tr.querySelector('.state').replaceChildren(stateBadge(job.state, job.cancel_requested));
    if (job.started_at) tr.querySelector('.duration').textContent = fmtDuration(job.started_at, job.finished_at);
    return;
  }
  tr.dataset.state = job.state;
  fill(tr, job);
}
