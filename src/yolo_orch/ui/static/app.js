// The dashboard: a hash router over its views, the token field and the status line. Views are
// drawn once the server's meta (states, kinds, params) is read.
import { ROOT, onAuthProblem, token } from './api.js';
import { h } from './dom.js';
import { startLive } from './live.js';
import { loadMeta } from './meta.js';
import { showStatus } from './status.js';
import { renderJob } from './views/job.js';
import { renderJobs } from './views/jobs.js';
import { renderModels } from './views/models.js';
import { renderOverview } from './views/overview.js';
import { renderQueue } from './views/queue.js';
import { renderSubmit } from './views/submit.js';

const main = document.getElementById('view');
let cleanup = null;
let routing = 0; // which call of `route` may still draw: a later one wins

const ROUTES = [
  [/^#?\/?$/, 'overview', () => renderOverview],
  [/^#\/jobs\/?$/, 'jobs', () => renderJobs],
  [/^#\/queue\/?$/, 'queue', () => renderQueue],
  [/^#\/jobs\/([\w-]+)$/, 'jobs', (match) => (el) => renderJob(el, match[1])],
  [/^#\/models\/?$/, 'models', () => renderModels],
  [/^#\/models\/([\w-]+)$/, 'models', (match) => (el) => renderModels(el, match[1])],
  [/^#\/models\/([\w.@%-]+)$/, 'models', (match) => (el) => renderModels(el, match[1])], // names with . and name@alias
  [/^#\/submit\/?$/, 'submit', () => renderSubmit],
  [/^#\/submit\/?\?[^#]*$/, 'submit', () => renderSubmit], // #/submit?model=<name>: a model page's "Use"
];

async function route() {
  cleanup?.();
  cleanup = null;
  showStatus('');
  const turn = ++routing;
  const hash = window.location.hash;
  for (const [pattern, view, make] of ROUTES) {
    const match = hash.match(pattern);
    if (!match) continue;
    for (const link of document.querySelectorAll('nav a')) {
      link.toggleAttribute('aria-current', link.dataset.view === view);
    }
    main.replaceChildren();
    main.dataset.view = view;
    try {
      await loadMeta();
    } catch (error) {
      // 401 and 403 are said by `onAuthProblem`; a token given later routes again.
      if (error.status !== 401 && error.status !== 403) showStatus(`cannot read /v1/meta: ${error.message}`);
      return;
    }
    if (turn !== routing) return;
    cleanup = make(match)(main) ?? null;
    return;
  }
  main.replaceChildren(h('p', {}, 'No such page. ', h('a', { href: '#/' }, 'Overview')));
}

function setLive(state) {
  const indicator = document.getElementById('live');
  indicator.dataset.state = state;
  indicator.textContent = { live: '● live', connecting: '○ connecting', reconnecting: '○ reconnecting', off: '✗ not live' }[state];
}

onAuthProblem((error) => {
  const what = error.status === 401
    ? 'the server wants a valid token (401). Enter one in the Token field.'
    : "this token's scope does not allow that (403).";
  showStatus(`${what} ${error.problem?.detail ?? ''}`.trim());
});

const form = document.getElementById('token-form');
const input = document.getElementById('token-input');
input.value = token.get();
form.addEventListener('submit', (event) => {
  event.preventDefault();
  if (input.value.trim()) token.set(input.value.trim());
  else token.clear();
  startLive(setLive);
  route();
});
document.getElementById('token-clear').addEventListener('click', () => {
  token.clear();
  input.value = '';
  startLive(setLive);
  route();
});

document.getElementById('zoom').addEventListener('click', (event) => {
  if (event.target.id === 'zoom') event.target.close(); // a click beside the image
});
// On PostgreSQL a standby head shows the shared database but runs nothing: its live updates and
// changes are the active head's, so the page says where that is.
async function noteStandby() {
  try {
    const answer = await (await fetch(`${ROOT}/readyz`)).json();
    if (answer.status !== 'standby') return;
    const active = answer.head?.active_url;
    const note = document.getElementById('head-note');
    note.replaceChildren(
      h('strong', {}, 'Standby head: '),
      'this server reads the shared database and runs no jobs; live updates and changes are made at the active head',
      active ? h('span', {}, ': ', h('a', { href: `${active}/` }, active)) : ' (none yet: a takeover is under way)',
      '.',
    );
    note.hidden = false;
  } catch {
    // no answer: the live indicator says the server is unreachable
  }
}

window.addEventListener('hashchange', route);
startLive(setLive);
noteStandby();
route();
