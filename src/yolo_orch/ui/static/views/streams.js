// Stream jobs as a person watches them: a card per stream with its latest snapshot, its health,
// frames per second, latency, drops and reconnects, each source, and the zone and line counts per
// class; the overview's "Live streams" section of every running stream; a lane's streams.
// Everything but the snapshot comes from the job events the page already follows: a stream's
// progress carries its health and counters. Sources are shown exactly as the API gives them
// (credentials already redacted by the server).
import { getJson } from '../api.js';
import { empty, h, shortId, stateBadge } from '../dom.js';
import { isTerminal } from '../meta.js';
import { snapshotView } from '../snapshot.js';
import { jobActions } from './actions.js';

// Each health in words with a symbol; the badge's colour and border only repeat it.
const HEALTH = {
  connecting: ['◌', 'connecting'],
  live: ['●', 'live'],
  reconnecting: ['↻', 'reconnecting'],
  source_lost: ['✗', 'source lost'],
};

export function healthBadge(health) {
  const [symbol, words] = HEALTH[health] ?? ['•', health];
  return h('span', { class: `badge health health-${health}`, 'data-health': health },
    h('span', { 'aria-hidden': 'true' }, symbol), ` ${words}`);
}

const known = (value) => value !== null && value !== undefined;
const oneDecimal = (value) => (known(value) ? Number(value).toFixed(1) : '–');
const total = (sources, key) => sources.reduce((sum, source) => sum + (source[key] ?? 0), 0);

// One stream's card. `update(job)` redraws it from a job event; the snapshot element is kept
// (only its image is swapped), so a redraw every second costs no fetch and no flicker.
export function streamCard(job) {
  const snapshot = snapshotView(job.id, job.params?.snapshot_every_s ?? 0);
  const badges = h('span', { class: 'stream-badges' });
  const actions = h('span', { class: 'stream-actions' });
  const figures = h('div', { class: 'tiles stream-figures' });
  const sources = h('div', { class: 'scroll' });
  const counts = h('div', { class: 'scroll' });
  const el = h('article', { class: 'stream', 'data-stream': job.id },
    h('header', {},
      h('h3', {}, h('a', { href: `#/jobs/${job.id}` }, `stream ${shortId(job.id)}`),
        h('span', { class: 'muted' }, ` · ${job.model}`)),
      badges, actions),
    h('div', { class: 'stream-body' }, snapshot.el,
      h('div', { class: 'stream-numbers' }, figures, sources, h('h4', {}, 'Counts'), counts)));
  let actionsFor = null;

  function update(next) {
    const detail = next.progress?.detail ?? {};
    const ended = isTerminal(next.state);
    const health = detail.health ?? 'connecting';
    const shown = detail.sources ?? (next.sources ?? []).map((source) => ({ source }));
    el.dataset.state = next.state;
    el.dataset.health = ended ? 'ended' : health;
    badges.replaceChildren(ended ? h('span', { class: 'badge health health-ended', 'data-health': 'ended' }, 'stream ended') : healthBadge(health),
      ' ', stateBadge(next.state, next.cancel_requested));
    const actionsKey = `${next.state}:${next.cancel_requested}`;
    if (actionsKey !== actionsFor) {
      actionsFor = actionsKey;
      actions.replaceChildren(ended ? '' : jobActions(next));
    }
    figures.replaceChildren(
      tile('frames', 'frames processed', next.progress?.total ? `${next.progress.done}/${next.progress.total}` : next.progress?.done ?? 0),
      tile('fps', 'fps in / out', `${oneDecimal(detail.fps_in)} / ${oneDecimal(detail.fps_out)}`),
      tile('latency', 'latency p50 / p99 (ms)', `${oneDecimal(detail.latency_ms?.p50)} / ${oneDecimal(detail.latency_ms?.p99)}`),
      tile('dropped', 'frames dropped', total(shown, 'frames_dropped')),
      tile('reconnects', 'reconnects', total(shown, 'reconnects')),
    );
    sources.replaceChildren(sourcesTable(shown));
    counts.replaceChildren(countsTable(detail.counts ?? [], next.params ?? {}));
    if (ended) snapshot.stop();
  }

  update(job);
  return { el, update, dispose: () => snapshot.dispose() };
}

function tile(name, label, value) {
  return h('div', { class: 'tile', 'data-figure': name },
    h('span', { class: 'tile-value' }, String(value)), h('span', { class: 'tile-label' }, label));
}

function sourcesTable(sources) {
  const cell = (value) => h('td', {}, known(value) ? String(value) : '–');
  return h('table', { class: 'stream-sources' },
    h('thead', {}, h('tr', {}, ['Source', 'Health', 'Read', 'Processed', 'Dropped', 'Reconnects', 'fps in', 'fps out']
      .map((title) => h('th', { scope: 'col' }, title)))),
    h('tbody', {}, sources.map((source) => h('tr', { 'data-source': source.source },
      h('td', { class: 'mono source-name' }, source.source),
      h('td', {}, known(source.health) ? healthBadge(source.health) : '–'),
      cell(source.frames_read), cell(source.frames_processed), cell(source.frames_dropped),
      cell(source.reconnects), h('td', {}, oneDecimal(source.fps_in)), h('td', {}, oneDecimal(source.fps_out))))));
}

// A row per source, zone or line, and class: zones count `inside` now and tracks going `in` and
// `out`; lines count crossings each way. A zone or line with nothing counted yet still has a row.
function countsTable(counts, params) {
  if (!params.zones?.length && !params.lines?.length) return empty('No zones or lines for this stream.');
  const several = counts.length > 1;
  const rows = [];
  for (const { source, zones = {}, lines = {} } of counts) {
    const places = [
      ...Object.entries(zones).map(([name, tally]) => ['zone', name, tally]),
      ...Object.entries(lines).map(([name, tally]) => ['line', name, tally]),
    ];
    for (const [what, name, tally] of places) {
      const classes = [...new Set(['inside', 'in', 'out'].flatMap((key) => Object.keys(tally[key] ?? {})))].sort();
      const of = (key, cls) => (what === 'line' && key === 'inside' ? '–' : String(tally[key]?.[cls] ?? 0));
      for (const cls of classes.length ? classes : [null]) {
        rows.push(h('tr', { 'data-count': `${what}:${name}`, 'data-class': cls ?? '' },
          several ? h('td', { class: 'mono' }, source) : '',
          h('td', {}, `${what} `, h('strong', {}, name)),
          h('td', {}, cls ?? h('span', { class: 'muted' }, 'nothing counted yet')),
          ['inside', 'in', 'out'].map((key) => h('td', { 'data-key': key }, cls === null ? '–' : of(key, cls)))));
      }
    }
  }
  if (!rows.length) return empty('Nothing counted yet.');
  return h('table', { class: 'stream-counts' },
    h('thead', {}, h('tr', {}, [several ? 'Source' : null, 'Zone / line', 'Class', 'Inside', 'In', 'Out']
      .filter(Boolean).map((title) => h('th', { scope: 'col' }, title)))),
    h('tbody', {}, rows));
}

// The overview's section of running streams: read once (and again on a resync), then kept
// current by `seen` from the server-wide event stream. A stream that ends stays, marked
// ended, until the list is read again; a deleted one goes.
export function liveStreams() {
  const box = h('div', { class: 'streams', id: 'streams' }, empty('Loading streams…'));
  const cards = new Map();

  function none() {
    if (!cards.size) box.replaceChildren(empty('No stream is running.'));
  }

  function add(job) {
    if (!cards.size) box.replaceChildren();
    const card = streamCard(job);
    cards.set(job.id, card);
    box.append(card.el);
  }

  function remove(id) {
    cards.get(id)?.dispose();
    cards.get(id)?.el.remove();
    cards.delete(id);
    none();
  }

  async function load() {
    try {
      const page = await getJson('/v1/jobs?kind=stream&state=running&limit=100');
      for (const id of [...cards.keys()]) remove(id);
      for (const job of page.jobs) add(job);
      none();
    } catch (error) {
      box.replaceChildren(empty(`Could not list the streams: ${error.message}`));
    }
  }

  load();
  return {
    el: box,
    load,
    seen(job) {
      if (job.kind !== 'stream') return;
      const card = cards.get(job.id);
      if (card) card.update(job);
      else if (job.state === 'running') add(job);
    },
    deleted: remove,
    stop() {
      for (const card of cards.values()) card.dispose();
    },
  };
}

// A lane's stream share (`stream_slots`, `stream_fps` of GET /v1/devices) and its streams, each
// with the fps it asked for and the fps it gets; the fps out is renewed by the job's events.
export function laneStreams(lane) {
  if (!known(lane.stream_slots) && !lane.streams?.length) return null;
  const asked = (lane.streams ?? []).reduce((sum, stream) => sum + (stream.fps_asked ?? 0), 0);
  const share = h('p', { class: 'muted lane-stream-share' },
    `Streams: ${lane.streams?.length ?? 0}/${lane.stream_slots ?? '–'} · ${oneDecimal(asked)} of ${oneDecimal(lane.stream_fps)} fps asked`);
  if (!lane.streams?.length) return share;
  return h('div', { class: 'lane-streams' }, share,
    h('ul', { class: 'lane-jobs' }, lane.streams.map((stream) => h('li', { 'data-lane-stream': stream.job_id, 'data-fps-asked': stream.fps_asked },
      h('a', { href: `#/jobs/${stream.job_id}` }, `stream ${shortId(stream.job_id)}`),
      ' ', h('span', { class: 'stream-fps' }, laneFps(stream.fps_out, stream.fps_asked))))));
}

const laneFps = (out, asked) => `${oneDecimal(out)} of ${oneDecimal(asked)} fps`;

// A lane's stream line, renewed from a stream job's event (its fps out as the job reports it).
export function updateLaneStream(root, job) {
  const fpsOut = job.progress?.detail?.fps_out;
  if (!known(fpsOut)) return;
  for (const item of root.querySelectorAll(`[data-lane-stream="${job.id}"]`)) {
    item.querySelector('.stream-fps').textContent = laneFps(fpsOut, item.dataset.fpsAsked);
  }
}
