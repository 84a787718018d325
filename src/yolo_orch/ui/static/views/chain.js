// A job's chain (a training's `then`), on the page of each of its steps: where the chain stands,
// its steps as a tree (the training, the root, made every other step: `parent_id`; each stage
// runs after the one above it), each with its state, and the promotion's gate with its figures.
// The root's link is the chain's page (#/jobs/<chain id>). Read again every 2 s until every
// step has ended.
import { getJson } from '../api.js';
import { h, section, shortId, stateBadge } from '../dom.js';
import { isTerminal } from '../meta.js';

const REREAD_MS = 2000;

export function chainSection(job) {
  const box = h('div', { class: 'chain', 'data-chain': job.chain_id });
  const el = section('Chain', box);
  let timer = null;
  let disposed = false;
  async function read() {
    timer = null;
    try {
      const chain = await getJson(`/v1/chains/${encodeURIComponent(job.chain_id)}`);
      box.replaceChildren(summary(chain, job.id), stepsTree(chain, job.id), ...promotion(chain));
      if (!chain.steps.every((step) => isTerminal(step.state)) && !disposed) timer = setTimeout(read, REREAD_MS);
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

function summary(chain, current) {
  const outcome = chain.promoted === null || chain.promoted === undefined
    ? ''
    : ` · ${chain.promoted ? 'promoted' : 'not promoted'}`;
  // A training's chain, or a tune's (its trials and its steps).
  const root = chain.steps.find((step) => step.id === chain.id)?.kind ?? 'job';
  const where = chain.id === current
    ? `This ${root} is the chain’s root: its steps are below.`
    : `The chain’s page is its ${root}’s (the root below).`;
  return h('p', { class: 'chain-summary' },
    h('span', { class: 'chain-state', 'data-chain-state': chain.state }, `chain ${shortId(chain.id)}: ${chain.state}${outcome}`),
    ` · ${chain.steps.length} steps. `, h('span', { class: 'muted' }, where));
}

// The steps in a tree: the roots (no parent in the chain), and under each its children in stages.
// The server lists them in the order they were made, each waiting for the stage before it; a
// stage is a run of steps of one kind on one model (the exports of several formats).
export function chainTree(steps) {
  const ids = new Set(steps.map((step) => step.id));
  const rows = [];
  for (const root of steps.filter((step) => !step.parent_id || !ids.has(step.parent_id))) {
    rows.push({ step: root, depth: 0 });
    let depth = 0;
    let stage = null;
    for (const child of steps.filter((step) => step.parent_id === root.id)) {
      const key = `${child.kind} ${child.model}`;
      if (key !== stage) {
        depth += 1;
        stage = key;
      }
      rows.push({ step: child, depth });
    }
  }
  return rows;
}

function stepsTree(chain, current) {
  const alias = promotedAlias(chain.steps);
  const rows = chainTree(chain.steps).map(({ step, depth }) => h('tr', {
    class: step.id === current ? 'current' : '',
    'data-step': step.id,
    'data-kind': step.kind,
    'data-depth': depth,
    'aria-level': depth + 1,
  },
  h('td', { class: 'tree-step' }, h('span', { class: 'tree-branch', 'aria-hidden': 'true' }, depth ? '└ ' : ''),
    h('a', { href: `#/jobs/${step.id}`, class: 'mono', 'aria-label': `${step.kind} ${shortId(step.id)}${depth ? '' : ' (the chain)'}` }, shortId(step.id)),
    ` ${step.kind}`, depth ? '' : h('span', { class: 'muted' }, ' (the chain)')),
  h('td', {}, stateBadge(step.state, step.cancel_requested)),
  h('td', { class: 'mono' }, step.model_id ? h('a', { href: `#/models/${encodeURIComponent(step.model_id)}` }, shortId(step.model_id)) : step.model),
  h('td', {}, note(step, alias)),
  ));
  return h('table', { class: 'table chain-tree', role: 'treegrid', 'aria-label': 'The chain’s steps' },
    h('thead', {}, h('tr', {}, ...['step', 'state', 'model', 'note'].map((name) => h('th', { scope: 'col' }, name)))),
    h('tbody', {}, ...rows));
}

// The alias a chain's promotion moves: its result says it once it ran; before, the validation
// that scores the alias's current model names it (`name@alias`).
function promotedAlias(steps) {
  const promote = steps.find((step) => step.kind === 'promote');
  if (!promote) return null;
  return promote.result?.alias ?? steps.find((step) => step.kind === 'validation' && step.model.includes('@'))?.model ?? null;
}

function note(step, alias) {
  if (step.error) return h('span', { class: 'mono', title: step.error.message }, step.error.code);
  if (step.waiting) return 'waiting for the stage above';
  if (step.kind === 'export') return step.params?.format ?? '';
  if (step.kind === 'validation' && alias && step.model === alias) return `scores ${alias}’s current model`;
  if (step.kind === 'promote') {
    const target = step.result?.alias ?? alias;
    if (!step.result) return `moves ${target ?? 'its alias'} if the gate passes`;
    return step.result.promoted ? `moved ${target}` : `kept ${target}`;
  }
  return '';
}

function fmtFigure(value) {
  return value === null || value === undefined ? '–' : String(value);
}

// The promotion: the alias, from where to where, and the gate's figures and decision.
function promotion(chain) {
  const step = chain.steps.find((s) => s.kind === 'promote');
  if (!step) return [];
  const result = step.result;
  if (!result) return [h('p', { class: 'muted gate-pending' }, `The promotion (to ${promotedAlias(chain.steps) ?? 'its alias'}) has not run yet.`)];
  const modelLink = (id) => (id ? h('a', { href: `#/models/${encodeURIComponent(id)}`, class: 'mono' }, shortId(id)) : 'nowhere');
  const moved = h('p', { class: 'promotion', 'data-promoted': String(result.promoted) },
    h('strong', {}, result.promoted ? '✓ promoted' : '✗ not promoted'), ': ',
    h('a', { href: `#/models/${encodeURIComponent(result.alias.split('@')[0])}` }, result.alias),
    ' pointed to ', modelLink(result.from_model_id),
    result.promoted ? [', now to ', modelLink(result.to_model_id)] : ', and still does',
    result.reason ? ` (${result.reason})` : '.');
  if (!result.gate) return [h('h3', {}, 'Promotion'), moved, h('p', { class: 'muted' }, 'No gate: the model is promoted without a score.')];
  const gate = result.gate;
  const figures = h('table', { class: 'table gate', 'aria-label': 'The gate’s figures' },
    h('thead', {}, h('tr', {}, ...['metric', 'new model', 'alias’s model', 'min', 'better', 'not worse', 'gate', 'promoted']
      .map((name) => h('th', { scope: 'col' }, name)))),
    h('tbody', {}, h('tr', {},
      h('td', { 'data-figure': 'metric' }, gate.metric),
      h('td', { 'data-figure': 'candidate' }, fmtFigure(gate.candidate)),
      h('td', { 'data-figure': 'baseline' }, gate.not_worse ? fmtFigure(gate.baseline) : '– (not asked)'),
      h('td', { 'data-figure': 'min' }, fmtFigure(gate.min)),
      h('td', { 'data-figure': 'better' }, gate.better),
      h('td', { 'data-figure': 'not_worse' }, gate.not_worse ? 'yes' : 'no'),
      h('td', { 'data-figure': 'passed' }, gate.passed ? '✓ passed' : '✗ failed'),
      h('td', { 'data-figure': 'promoted' }, result.promoted ? 'true' : 'false'))));
  const reasons = gate.reasons?.length ? h('ul', { class: 'gate-reasons' }, gate.reasons.map((r) => h('li', {}, r))) : null;
  return [h('h3', {}, 'Promotion gate'), moved, h('div', { class: 'scroll' }, figures), reasons].filter(Boolean);
}
