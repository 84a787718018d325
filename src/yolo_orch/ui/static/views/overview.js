// Overview: each lane (busy or free, its jobs with progress, its streams), each GPU's gauges and
// sparklines, the queue depth, 429 refusals and jobs per state, a card per running stream, and
// charts of what the server did over time. Live from /v1/events.
import { getJson, request, parseMetrics } from '../api.js';
import { sparkline } from '../charts.js';
import { empty, fmtBytes, h, progressBar, section, shortId, stateBadge, updateProgress } from '../dom.js';
import { onLive } from '../live.js';
import { meta } from '../meta.js';
import { activityCharts } from './activity.js';
import { laneStreams, liveStreams, updateLaneStream } from './streams.js';

const GAUGES = [
  ['memory', 'Memory', (d) => d.memory_used_bytes, (d) => d.memory_total_bytes,
    (d) => `${fmtBytes(d.memory_used_bytes)} of ${fmtBytes(d.memory_total_bytes)}`],
  ['utilization', 'Utilisation', (d) => d.utilization_percent, () => 100, (d) => `${d.utilization_percent} %`],
  ['temperature', 'Temperature', (d) => d.temperature_c, () => 100, (d) => `${d.temperature_c} °C`],
  ['power', 'Power', (d) => d.power_w, () => null, (d) => `${d.power_w} W`],
];

export function renderOverview(main) {
  const lanesBox = h('div', { class: 'lanes', id: 'lanes' }, empty('Loading lanes…'));
  const countsBox = h('div', { class: 'tiles', id: 'counts' });
  const streams = liveStreams();
  const activity = activityCharts();
  main.append(
    h('h1', {}, 'Overview'),
    section('Queue and jobs', countsBox),
    section('Over time', activity.el),
    section('Live streams', streams.el),
    section('Lanes', lanesBox),
  );
  const jobs = new Map(); // the jobs on lanes, kept current by the stream
  let history = { enabled: false, interval_s: 5, devices: [] };
  let devices = null;
  let refreshTimer = null;
  let telemetryTimer = null;

  async function refresh() {
    try {
      const [deviceList, metricsText, historyBody] = await Promise.all([
        getJson('/v1/devices'),
        request('/metrics').then((r) => r.text()),
        getJson('/v1/devices/history'),
      ]);
      devices = deviceList;
      history = historyBody;
      const onLanes = deviceList.devices.flatMap((d) => d.jobs).filter((id) => !jobs.has(id));
      await Promise.all(onLanes.map(async (id) => {
        try {
          jobs.set(id, await getJson(`/v1/jobs/${id}`));
        } catch { /* it ended meanwhile */ }
      }));
      drawCounts(countsBox, parseMetrics(metricsText));
      drawLanes();
      if (history.enabled && !telemetryTimer) {
        telemetryTimer = setInterval(refresh, history.interval_s * 1000);
      }
    } catch (error) {
      lanesBox.replaceChildren(empty(`Could not read the lanes: ${error.message}`));
    }
  }

  function drawLanes() {
    const byLane = Object.fromEntries(history.devices.map((d) => [d.id, d.samples]));
    lanesBox.replaceChildren(...devices.devices.map((lane) => laneCard(lane, byLane[lane.id] ?? [], jobs, devices.runtime)));
    if (!devices.devices.some((lane) => lane.memory_total_bytes !== null || byLane[lane.id]?.length)) {
      lanesBox.append(h('p', { class: 'note', id: 'no-telemetry' }, 'No GPU telemetry: NVML is not available on this host, or no lane is a GPU.'));
    }
  }

  function later() {
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(refresh, 300);
  }

  const stop = onLive((type, job) => {
    if (type === 'resync') streams.load();
    if (type === 'deleted') streams.deleted(job.id);
    if (type !== 'job') return later();
    streams.seen(job);
    updateLaneStream(lanesBox, job);
    const known = jobs.get(job.id);
    jobs.set(job.id, job);
    if (!known || known.state !== job.state) return later();
    const bar = lanesBox.querySelector(`[data-job="${job.id}"] .progress-wrap`);
    if (bar) updateProgress(bar, job);
  });
  refresh();
  return () => {
    stop();
    streams.stop();
    activity.stop();
    clearTimeout(refreshTimer);
    clearInterval(telemetryTimer);
  };
}

function drawCounts(box, metrics) {
  const byState = Object.fromEntries(meta().states.map((s) => [s, 0]));
  for (const { labels, value } of metrics.yolo_orch_jobs ?? []) {
    byState[labels.state] = (byState[labels.state] ?? 0) + value;
  }
  const tile = (name, label, value) => h('div', { class: 'tile', 'data-tile': name },
    h('span', { class: 'tile-value' }, String(value)), h('span', { class: 'tile-label' }, label));
  // The queue depth is the count of queued jobs: one tile says it, and leads to the queue.
  const queue = tile('queue', 'queued · see the queue ›', metrics.yolo_orch_queue_depth?.[0]?.value ?? 0);
  box.replaceChildren(
    h('a', { href: '#/queue', class: 'tile-link', 'aria-label': 'The queue, in start order' }, queue),
    tile('refused', '429 refusals', metrics.yolo_orch_rejected_submissions_total?.[0]?.value ?? 0),
    ...meta().states.filter((state) => state !== 'queued').map((state) => tile(state, state, byState[state])),
  );
}

function laneCard(lane, samples, jobs, runtime) {
  const busy = lane.busy > 0;
  const status = !lane.healthy ? 'unhealthy' : lane.wedged ? 'wedged' : busy ? 'busy' : 'free';
  const card = h('article', { class: `lane lane-${status}`, 'data-lane': lane.id },
    h('header', {},
      h('div', {}, h('h3', {}, lane.id), h('span', { class: 'muted device-name' }, lane.device_name ?? `${runtime} runtime`)),
      h('span', { class: `badge lane-status-${status}` }, `${status} · ${lane.busy}/${lane.slots} slot(s)`)),
  );
  const running = lane.jobs.map((id) => {
    const job = jobs.get(id) ?? { id, state: 'running', progress: null };
    return h('li', { 'data-job': id },
      h('a', { href: `#/jobs/${id}` }, `${job.kind ?? 'job'} ${shortId(id)}`), ' ',
      job.state ? stateBadge(job.state, job.cancel_requested) : '', ' ', progressBar(job));
  });
  if (running.length) card.append(h('ul', { class: 'lane-jobs' }, running));
  else if (!lane.streams?.length) card.append(h('p', { class: 'muted' }, 'No job.'));
  const streamsOfLane = laneStreams(lane);
  if (streamsOfLane) card.append(streamsOfLane);
  if (lane.models.length) card.append(h('p', { class: 'muted' }, `Loaded: ${lane.models.join(', ')}`));
  if (lane.memory_total_bytes !== null || samples.length) card.append(gauges(lane, samples));
  return card;
}

function gauges(lane, samples) {
  const latest = lane.memory_total_bytes !== null ? lane : samples[samples.length - 1] ?? lane;
  return h('div', { class: 'gauges' }, GAUGES.map(([name, label, value, max, text]) => {
    const now = value(latest);
    const top = max(latest);
    return h('div', { class: 'gauge', 'data-gauge': name },
      h('span', { class: 'gauge-label' }, label),
      now === null || now === undefined
        ? h('span', { class: 'muted' }, 'not reported')
        : [
          top ? h('meter', { min: 0, max: top, value: now, 'aria-label': `${lane.id} ${label}` }) : '',
          h('span', { class: 'gauge-value' }, text(latest)),
        ],
      sparkline(samples.map(value), { max: top, label: `${lane.id} ${label}` }));
  }));
}
