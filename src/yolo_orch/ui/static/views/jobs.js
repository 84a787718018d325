// Jobs: a list with state and kind filters and cursor paging, live progress, cancel and delete.
import { getJson } from '../api.js';
import { empty, fmtTime, h, progressBar, section, shortId, stateBadge, updateProgress } from '../dom.js';
import { onLive } from '../live.js';
import { isTerminal, meta } from '../meta.js';
import { jobActions } from './actions.js';

const PAGE = 20;

export function renderJobs(main) {
  const stateSelect = select('filter-state', 'State', meta().states);
  const kindSelect = select('filter-kind', 'Kind', meta().kinds.map((entry) => entry.kind));
  const body = h('tbody', {});
  const more = h('button', { type: 'button', id: 'older', hidden: true }, 'Older jobs');
  const table = h('div', { class: 'scroll' }, h('table', { class: 'jobs' },
    h('thead', {}, h('tr', {}, ['Job', 'Kind', 'State', 'Model', 'Progress', 'Created', 'Actions'].map((t) => h('th', { scope: 'col' }, t)))),
    body));
  const filters = h('form', { class: 'filters', role: 'search' }, stateSelect.label, kindSelect.label);
  main.append(h('h1', {}, 'Jobs'), section('Jobs', filters, table, more));
  let cursor = null;

  const query = () => {
    const params = new URLSearchParams({ limit: String(PAGE) });
    if (stateSelect.input.value) params.append('state', stateSelect.input.value);
    if (kindSelect.input.value) params.append('kind', kindSelect.input.value);
    if (cursor) params.set('cursor', cursor);
    return `/v1/jobs?${params}`;
  };
  const matches = (job) => (!stateSelect.input.value || job.state === stateSelect.input.value)
    && (!kindSelect.input.value || job.kind === kindSelect.input.value);

  async function load(reset) {
    if (reset) {
      cursor = null;
      body.replaceChildren();
    }
    try {
      const page = await getJson(query());
      // A job the stream showed while this page was on its way is already listed.
      const fresh = page.jobs.filter((job) => !body.querySelector(`tr[data-job="${job.id}"]`));
      body.append(...fresh.map(row));
      cursor = page.next_cursor;
      more.hidden = !cursor;
      if (!body.children.length) body.append(h('tr', { class: 'none' }, h('td', { colspan: 7 }, empty('No jobs.'))));
    } catch (error) {
      body.replaceChildren(h('tr', {}, h('td', { colspan: 7 }, empty(`Could not list jobs: ${error.message}`))));
    }
  }

  more.addEventListener('click', () => load(false));
  for (const { input } of [stateSelect, kindSelect]) input.addEventListener('change', () => load(true));

  const stop = onLive((type, job) => {
    if (type === 'resync') return load(true);
    if (type === 'deleted') return body.querySelector(`tr[data-job="${job.id}"]`)?.remove();
    const existing = body.querySelector(`tr[data-job="${job.id}"]`);
    if (existing && !matches(job)) return existing.remove();
    if (existing) return updateRow(existing, job);
    if (matches(job)) {
      body.querySelector('tr.none')?.remove();
      body.prepend(row(job)); // new jobs are the newest: they belong on top
    }
  });
  load(true);
  return stop;
}

function select(id, labelText, values) {
  const input = h('select', { id, name: id },
    h('option', { value: '' }, 'any'), values.map((v) => h('option', { value: v }, v)));
  return { input, label: h('label', { for: id }, `${labelText} `, input) };
}

function row(job) {
  const tr = h('tr', { 'data-job': job.id, 'data-state': job.state });
  fill(tr, job);
  return tr;
}

function fill(tr, job) {
  tr.replaceChildren(
    h('td', {}, h('a', { href: `#/jobs/${job.id}`, class: 'mono' }, shortId(job.id))),
    h('td', {}, job.kind),
    h('td', { class: 'state' }, stateBadge(job.state, job.cancel_requested)),
    h('td', {}, job.model),
    h('td', { class: 'progress-cell' }, progressBar(job)),
    h('td', {}, fmtTime(job.created_at)),
    h('td', { class: 'actions' }, jobActions(job)),
  );
}

function updateRow(tr, job) {
  if (tr.dataset.state === job.state && !isTerminal(job.state)) {
    updateProgress(tr.querySelector('.progress-wrap'), job);
    tr.querySelector('.state').replaceChildren(stateBadge(job.state, job.cancel_requested));
    return;
  }
  tr.dataset.state = job.state;
  fill(tr, job);
}
