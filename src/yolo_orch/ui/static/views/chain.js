// A job's chain (a training's `then`): its steps in order, each linked, with its state, and the
// promotion's outcome with the gate's figures. Read again every 2 s until every step has ended.
import { getJson } from '../api.js';
import { definitionList, h, section, shortId, stateBadge } from '../dom.js';

const REREAD_MS = 2000;

export function chainSection(job) {
  const box = h('div', {});
  const el = section('Chain', box);
  let timer = null;
  let disposed = false;
  async function read() {
    timer = null;
    try {
      const chain = await getJson(`/v1/chains/${encodeURIComponent(job.chain_id)}`);
      box.replaceChildren(stepsTable(chain, job.id), ...promotion(chain));
      const unfinished = chain.state === 'queued' || chain.state === 'running';
      if (unfinished && !disposed) timer = setTimeout(read, REREAD_MS);
    } catch (error) {
      box.replaceChildren(h('p', { class: 'muted' }, `Could not read the chain: ${error.message}`));
    }
  }
  read();
  return {
    el,
    dispose: () => {
      disposed = true;
      if (timer !== null) clearTimeout(timer);
    },
  };
}

function stepsTable(chain, current) {
  const rows = chain.steps.map((step) => h('tr', { class: step.id === current ? 'current' : '' },
    h('td', {}, step.kind),
    h('td', {}, stateBadge(step.state, step.cancel_requested)),
    h('td', { class: 'mono' }, h('a', { href: `#/jobs/${step.id}` }, shortId(step.id))),
    h('td', { class: 'mono' }, step.model_id ? shortId(step.model_id) : step.model),
    h('td', {}, step.error ? step.error.code : (step.waiting ? 'waiting' : '')),
  ));
  return h('table', { class: 'table' },
    h('thead', {}, h('tr', {}, ...['step', 'state', 'job', 'model', 'note'].map((name) => h('th', {}, name)))),
    h('tbody', {}, ...rows));
}

function promotion(chain) {
  const step = chain.steps.find((s) => s.kind === 'promote');
  if (!step || !step.result) return [];
  const result = step.result;
  const entries = [
    ['alias', result.alias],
    ['promoted', result.promoted ? `yes: ${shortId(result.to_model_id)}` : 'no'],
  ];
  if (result.reason) entries.push(['why not', result.reason]);
  if (result.gate) {
    const gate = result.gate;
    entries.push(['gate', `${gate.metric} ${gate.better === 'lower' ? '≤' : '≥'} ${gate.min ?? '–'}${gate.not_worse ? ', not worse than the alias' : ''}`]);
    entries.push(['candidate', String(gate.candidate ?? '–')]);
    if (gate.not_worse) entries.push(['baseline', String(gate.baseline ?? '– (none yet)')]);
  }
  return [definitionList(entries)];
}
