// One model (#/models/<ref>: its id, its name, or name@alias): what it is, a link that opens the
// submit page with it chosen (#/submit?model=<name>), a delete (admin; confirmed), the job that
// made it (its `source`: `training:<job id>`), the jobs that made its variants, the jobs that used
// it, and its aliases (model_aliases.js).
import { getJson, request } from '../api.js';
import { copyButton, definitionList, empty, fmtBytes, fmtTime, h, section, shortId, stateBadge } from '../dom.js';
import { showStatus } from '../status.js';
import { aliasesSection } from './model_aliases.js';

const JOBS_SHOWN = 50;

export function renderModelPage(main, ref) {
  const body = h('div', { class: 'model-page' });
  main.append(h('p', {}, h('a', { href: '#/models' }, '← every model')), body);
  let turn = 0;
  let gone = false;

  async function draw() {
    const mine = ++turn;
    let model;
    let models;
    try {
      [model, { models }] = await Promise.all([
        getJson(`/v1/models/${encodeURIComponent(ref)}`),
        getJson('/v1/models'),
      ]);
    } catch (error) {
      if (gone || mine !== turn) return;
      body.replaceChildren(h('h1', {}, 'Model ', h('code', {}, ref)),
        empty(error.status === 404 ? `No model ${ref} in the registry (deleted?).` : `Could not read the model: ${error.message}`));
      return;
    }
    const parts = [
      head(model),
      section('Model', facts(model)),
      section('Jobs', await jobsOf(model)),
      await aliasesSection(model, models, draw),
    ];
    if (gone || mine !== turn) return;
    body.replaceChildren(...parts);
  }
  draw();
  return () => {
    gone = true;
  };
}

function head(model) {
  const use = h('a', {
    href: `#/submit?model=${encodeURIComponent(model.name)}`,
    class: 'button-link use',
    'aria-label': `Use ${model.name} in a new job`,
  }, 'Use');
  const remove = h('button', {
    type: 'button',
    class: 'small delete',
    'aria-label': `Delete model ${model.name}`,
    onclick: () => deleteModel(model),
  }, 'Delete');
  return h('div', { class: 'model-head' },
    h('h1', {}, 'Model ', h('code', { 'data-model-name': model.name }, model.name),
      model.usable ? '' : h('span', { class: 'badge state-failed' }, ' ✗ unusable')),
    h('div', { class: 'model-actions' }, use, ' ', remove));
}

async function deleteModel(model) {
  if (!window.confirm(`Delete model ${model.name} (${shortId(model.id)}) from the registry?`)) return;
  let cascade = false;
  if (model.variants.length) {
    const formats = model.variants.map((v) => v.format).join(', ');
    if (!window.confirm(`Its ${model.variants.length} variant(s) (${formats}) are deleted with it. Go on?`)) return;
    cascade = true;
  }
  try {
    await request(`/v1/models/${encodeURIComponent(model.id)}${cascade ? '?cascade=true' : ''}`, { method: 'DELETE' });
    // Said once the registry is drawn: a route clears the status line first.
    window.addEventListener('hashchange', () => showStatus(`deleted model ${model.name} (${shortId(model.id)})`, 'note'), { once: true });
    window.location.hash = '#/models';
  } catch (error) {
    // 401 and 403 are said by the page's auth listener (app.js); 409 says what keeps it.
    if (error.status !== 401 && error.status !== 403) showStatus(`delete refused: ${error.message}`);
  }
}

// The job that made a model or a variant: `<kind>:<job id>` in its `source`.
function producer(source) {
  const match = /^(\w+):([\w-]+)$/.exec(source ?? '');
  return match ? { kind: match[1], id: match[2] } : null;
}

function facts(model) {
  const made = producer(model.source);
  return definitionList([
    ['id', h('span', {}, h('code', {}, model.id), ' ', copyButton(model.id))],
    ['task', model.task],
    ['classes', `${model.class_names.length}: ${model.class_names.slice(0, 20).join(', ')}${model.class_names.length > 20 ? ' …' : ''}`],
    ['size', fmtBytes(model.size_bytes)],
    ['sha256', h('span', {}, h('code', { title: model.sha256 }, model.sha256.slice(0, 12)), ' ', copyButton(model.sha256))],
    ['source', made ? h('span', {}, `${made.kind} job `, h('a', { href: `#/jobs/${made.id}`, class: 'mono made-by' }, shortId(made.id))) : model.source],
    ['imported', fmtTime(model.created_at)],
    ['variants', model.variants.length ? model.variants.map((v) => `${v.format}${v.usable ? '' : ' (✗ unusable)'}`).join(', ') : 'none'],
    ['aliases here', model.aliases.length ? model.aliases.join(', ') : 'none'],
  ]);
}

// What made it (the source's job, the exports of its variants) and what used it: the jobs that
// name it by name, by id, by an alias pointing to it or as the chain's `job:<training id>`, kept
// where the model they ran (`model_id`) is this one or not known yet.
async function jobsOf(model) {
  const made = [producer(model.source), ...model.variants.map((v) => producer(v.source))].filter(Boolean);
  const makers = await Promise.all(made.map(async ({ kind, id }) => {
    try {
      return { kind, job: await getJson(`/v1/jobs/${encodeURIComponent(id)}`) };
    } catch {
      return { kind, job: null, id };
    }
  }));
  const names = [model.name, model.id, ...model.aliases];
  const training = makers.find((m) => m.kind === 'training' && m.job);
  if (training) names.push(`job:${training.job.id}`);
  const pages = await Promise.all(names.map((name) => getJson(`/v1/jobs?model=${encodeURIComponent(name)}&limit=${JOBS_SHOWN}`)
    .then((page) => page.jobs).catch(() => [])));
  const seen = new Map();
  for (const job of pages.flat()) {
    if (job.model_id && job.model_id !== model.id) continue; // an alias that pointed elsewhere then
    seen.set(job.id, job);
  }
  const used = [...seen.values()].sort((a, b) => (a.created_at < b.created_at ? 1 : -1));
  const madeBy = makers.length
    ? h('ul', { class: 'made-by-jobs' }, makers.map(({ kind, job, id }) => h('li', {},
      kind === 'training' ? 'made by ' : `made its ${kind === 'export' ? 'variant' : kind}: `,
      job ? [h('a', { href: `#/jobs/${job.id}`, class: 'mono' }, shortId(job.id)), ` ${job.kind} `, stateBadge(job.state)] : h('span', { class: 'mono' }, `${shortId(id)} (deleted)`))))
    : h('p', { class: 'muted' }, `Imported (${model.source}): no job made it.`);
  return h('div', {}, h('h3', {}, 'Made by'), madeBy, h('h3', {}, 'Used by'), usedTable(used));
}

function usedTable(jobs) {
  if (!jobs.length) return empty('No job used it yet.');
  return h('div', { class: 'scroll' }, h('table', { class: 'table used-by' },
    h('thead', {}, h('tr', {}, ...['job', 'kind', 'state', 'named it', 'created'].map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, ...jobs.map((job) => h('tr', { 'data-job': job.id },
      h('td', {}, h('a', { href: `#/jobs/${job.id}`, class: 'mono' }, shortId(job.id))),
      h('td', {}, job.kind),
      h('td', {}, stateBadge(job.state, job.cancel_requested)),
      h('td', { class: 'mono' }, job.model),
      h('td', {}, fmtTime(job.created_at)))))));
}
