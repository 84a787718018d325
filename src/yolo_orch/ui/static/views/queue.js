// Queue: the queued jobs in the order the dispatcher would start them (GET /v1/queue), each with
// its position, priority and effective priority (aging included) and expected start (the
// estimate a 429's Retry-After says). Read again when a job changes, as the stream says.
import { getJson } from '../api.js';
import { empty, fmtTime, h, section, shortId } from '../dom.js';
import { onLive } from '../live.js';

const SHOWN = 200;
const QUEUE_LOOKUP = 500; // GET /v1/queue's most: a job further back is said to be so
const SETTLE_MS = 400; // a burst of changes is one read, not one each

export function renderQueue(main) {
  const summary = h('p', { class: 'muted', id: 'queue-summary' });
  const body = h('tbody', {});
  const table = h('div', { class: 'scroll' }, h('table', { class: 'queue' },
    h('thead', {}, h('tr', {}, ['#', 'Job', 'Kind', 'Model', 'Priority', 'Effective', 'Waited', 'Expected start'].map((t) => h('th', { scope: 'col' }, t)))),
    body));
  main.append(h('h1', {}, 'Queue'), section('In start order', summary, table));
  let timer = null;

  async function load() {
    try {
      const queue = await getJson(`/v1/queue?limit=${SHOWN}`);
      const now = new Date(queue.at);
      body.replaceChildren(...queue.jobs.map((entry) => queueRow(entry, now)));
      if (!queue.jobs.length) body.append(h('tr', { class: 'none' }, h('td', { colspan: 8 }, empty('No job is waiting for a lane.'))));
      const left = queue.queued - queue.jobs.length;
      summary.textContent = `${queue.queued} queued` + (left > 0
        ? `; ${left} not listed (past the first ${SHOWN}, waiting for other jobs, or needing more lanes than are healthy).`
        : '.');
    } catch (error) {
      body.replaceChildren(h('tr', {}, h('td', { colspan: 8 }, empty(`Could not read the queue: ${error.message}`))));
    }
  }

  const stop = onLive(() => {
    clearTimeout(timer);
    timer = setTimeout(load, SETTLE_MS);
  });
  load();
  return () => {
    stop();
    clearTimeout(timer);
  };
}

function queueRow(entry, now) {
  const { job } = entry;
  return h('tr', { 'data-job': job.id, 'data-position': entry.position },
    h('td', { class: 'position' }, String(entry.position)),
    h('td', {}, h('a', { href: `#/jobs/${job.id}`, class: 'mono' }, shortId(job.id))),
    h('td', {}, job.kind),
    h('td', {}, job.model),
    h('td', {}, String(job.priority)),
    h('td', { class: 'effective' }, String(entry.effective_priority)),
    h('td', {}, seconds((now - new Date(job.created_at)) / 1000)),
    h('td', { class: 'expected', title: fmtTime(entry.expected_start_at) }, expectedStart(entry)));
}

export function expectedStart(entry) {
  return entry.expected_wait_s < 1 ? 'next free slot' : `in ~${seconds(entry.expected_wait_s)}`;
}

function seconds(value) {
  if (value < 90) return `${Math.max(0, Math.round(value))} s`;
  if (value < 5400) return `${Math.round(value / 60)} min`;
  return `${(value / 3600).toFixed(1)} h`;
}

// A queued job's place on its page: its position in the start order, its effective priority and
// expected start; read again (at most once a second) as jobs change.
export function queuePlace(jobId) {
  const el = h('p', { class: 'queue-place', id: 'queue-place', hidden: true });
  let job = null;
  let timer = null;
  let reading = false;

  async function read() {
    timer = null;
    if (!job || job.state !== 'queued' || reading) return;
    reading = true;
    try {
      const queue = await getJson(`/v1/queue?limit=${QUEUE_LOOKUP}`);
      const entry = queue.jobs.find((each) => each.job.id === jobId);
      if (job?.state !== 'queued') return;
      el.hidden = false;
      el.dataset.position = entry ? String(entry.position) : '';
      el.replaceChildren(entry
        ? h('span', {}, h('strong', {}, `Position ${entry.position}`), ` of ${queue.queued} queued · effective priority ${entry.effective_priority} · expected start ${expectedStart(entry)}`)
        : h('span', {}, job.waiting
          ? 'Waiting for the jobs of its after / after_ok: not in the start order yet.'
          : `Not among the first ${QUEUE_LOOKUP} to start (of ${queue.queued} queued), or it needs more lanes than are healthy.`));
    } catch {
      // The place is a hint: the job's own state says the rest.
    } finally {
      reading = false;
    }
  }

  return {
    el,
    // The job as last seen; its place is read again soon, or hidden once it left the queue.
    seen(next) {
      job = next;
      if (job.state !== 'queued') {
        el.hidden = true;
        return;
      }
      if (!timer) timer = setTimeout(read, el.hidden ? 0 : 1000); // the first read at once
    },
    stop() {
      clearTimeout(timer);
      job = null;
    },
  };
}
