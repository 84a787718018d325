// A model page's aliases: those pointing to it, of its name, or to a model of its task, with
// where it points, its history (who, when, from, to, why), a promote (PUT: point it to a chosen
// model, a compare-and-set on where it points now) and a rollback (POST .../rollback); and a
// form that points a new or existing alias of the name here. Moving needs `models:write`: a
// refusal is said on the status line (api.js's 401/403 listener) and nothing changes.
import { getJson, request } from '../api.js';
import { empty, fmtTime, h, section, shortId } from '../dom.js';
import { showStatus } from '../status.js';

const HISTORY_LIMIT = 20;

// `model`: the page's model (detail); `models`: the registry's list; `changed`: draw the page again.
// The aliases shown: those pointing to it, those of its name, then every other alias whose model
// is of its task (where it could be promoted).
export async function aliasesSection(model, models, changed) {
  const box = h('div', { class: 'aliases' });
  const el = section('Aliases', box);
  let all = [];
  try {
    all = (await getJson('/v1/aliases')).aliases;
  } catch (error) {
    box.append(empty(`Could not list the aliases: ${error.message}`));
  }
  const taskOf = (alias) => models.find((m) => m.id === alias.model_id)?.task;
  const rank = (alias) => {
    if (alias.model_id === model.id) return 0;
    return alias.name === model.name ? 1 : 2;
  };
  const aliases = all
    .filter((alias) => rank(alias) < 2 || taskOf(alias) === model.task)
    .sort((a, b) => rank(a) - rank(b));
  if (!aliases.length) box.append(empty(`No alias points to ${model.name} or to a model of its task yet.`));
  const cards = await Promise.all(aliases.map((alias) => aliasCard(alias, model, models, changed)));
  box.append(...cards, newAliasForm(model, changed));
  return el;
}

function aliasPath(name, label) {
  return `/v1/models/${encodeURIComponent(name)}/aliases/${encodeURIComponent(label)}`;
}

// A link to a model's page: its name and short id (`compact`: its name only, the id as its title).
function modelLink(id, models, here, compact = false) {
  if (!id) return h('span', { class: 'muted' }, 'none');
  const known = models.find((m) => m.id === id);
  const text = known ? (compact ? known.name : `${known.name} (${shortId(id)})`) : shortId(id);
  return h('a', { href: `#/models/${encodeURIComponent(id)}`, class: 'mono', title: id, 'data-model-id': id },
    text, id === here ? ' · this model' : '');
}

async function aliasCard(alias, model, models, changed) {
  const path = aliasPath(alias.name, alias.alias);
  let history = [];
  let historyError = null;
  try {
    history = (await getJson(`${path}/history?limit=${HISTORY_LIMIT}`)).moves;
  } catch (error) {
    historyError = error.message;
  }
  const target = models.find((m) => m.id === alias.model_id);
  return h('article', { class: 'alias', 'data-alias': alias.ref },
    h('h3', {}, h('code', {}, alias.ref), ' → ', modelLink(alias.model_id, models, model.id)),
    h('p', { class: 'muted' }, `moved last by ${alias.updated_by}, ${fmtTime(alias.updated_at)}`),
    aliasActions(alias, path, target, model, models, changed),
    historyError ? empty(`Could not read its history: ${historyError}`) : historyTable(history, models, model.id));
}

function historyTable(moves, models, here) {
  if (!moves.length) return empty('No move recorded.');
  return h('div', { class: 'scroll' }, h('table', { class: 'table alias-history', 'aria-label': 'history, newest first' },
    h('thead', {}, h('tr', {}, ...['when', 'who', 'from', 'to', 'why'].map((t) => h('th', { scope: 'col' }, t)))),
    h('tbody', {}, ...moves.map((move) => h('tr', { 'data-seq': move.seq },
      h('td', {}, fmtTime(move.at)),
      h('td', { class: 'who' }, move.actor),
      h('td', { class: 'from' }, move.from_model_id ? modelLink(move.from_model_id, models, here, true) : 'made'),
      h('td', { class: 'to' }, move.to_model_id ? modelLink(move.to_model_id, models, here, true) : 'deleted'),
      h('td', { class: 'why' }, move.reason ?? '–'))))));
}

// Promote: the models the alias may point to (usable, of its current model's task), this page's
// model chosen first; rollback: back to where its last move took it from.
function aliasActions(alias, path, target, model, models, changed) {
  const task = target?.task ?? model.task;
  const choices = models.filter((m) => m.usable && m.task === task && m.id !== alias.model_id);
  const id = `promote-${alias.name}-${alias.alias}`.replace(/[^\w-]/g, '-');
  const select = h('select', { id: `${id}-model`, name: 'model', class: 'promote-model' },
    choices.map((m) => h('option', { value: m.id, selected: m.id === model.id }, `${m.name} (${shortId(m.id)})`)));
  const reason = h('input', { type: 'text', id: `${id}-reason`, name: 'reason', class: 'promote-reason', placeholder: 'why (kept in the history)', 'aria-label': `Why move ${alias.ref}` });
  const promote = h('form', { class: 'promote', 'aria-label': `Promote a model to ${alias.ref}` },
    h('label', { for: select.id }, 'Point to ', select), ' ',
    reason, ' ',
    h('button', { type: 'submit', class: 'small', disabled: !choices.length }, 'Promote'));
  promote.addEventListener('submit', async (event) => {
    event.preventDefault();
    const body = { model: select.value, expected_model_id: alias.model_id };
    if (reason.value.trim()) body.reason = reason.value.trim();
    await act(() => request(path, { method: 'PUT', json: body }), `${alias.ref} now points to`, changed);
  });
  const rollback = h('button', {
    type: 'button',
    class: 'small rollback',
    'aria-label': `Roll back ${alias.ref}`,
    onclick: async () => {
      if (!window.confirm(`Move ${alias.ref} back to the model it pointed to before its last move?`)) return;
      await act(() => request(`${path}/rollback`, { method: 'POST', json: { reason: 'rolled back from the dashboard' } }), `${alias.ref} rolled back to`, changed);
    },
  }, 'Roll back');
  return h('div', { class: 'alias-actions' }, promote, rollback);
}

// A new alias (or any alias, `name@alias`) pointed at the page's model; the name is the model's
// unless another is typed.
function newAliasForm(model, changed) {
  const ref = h('input', {
    type: 'text', id: 'new-alias', name: 'alias', required: true, value: `${model.name}@`,
    placeholder: `${model.name}@production`,
  });
  const form = h('form', { class: 'new-alias', 'aria-label': 'Point an alias to this model' },
    h('label', { for: 'new-alias' }, 'Point ', ref, ' here'), ' ',
    h('button', { type: 'submit', class: 'small' }, 'Point'));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const [name, label] = ref.value.trim().split('@');
    if (!name || !label) return showStatus('name the alias as name@alias (detector@production)');
    await act(() => request(aliasPath(name, label), { method: 'PUT', json: { model: model.id, reason: 'set from the dashboard' } }),
      `${name}@${label} now points to`, changed);
  });
  return form;
}

async function act(send, said, changed) {
  try {
    const moved = await (await send()).json();
    showStatus(`${said} ${shortId(moved.model_id)} (by ${moved.move.actor})`, 'note');
    changed();
  } catch (error) {
    // 401 and 403 are said by the page's auth listener; the rest here.
    if (error.status !== 401 && error.status !== 403) showStatus(error.message);
  }
}
