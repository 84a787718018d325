// Over time, on the overview: small charts of GET /v1/history (jobs started and ended, queue
// depth and 429 refusals, run-time p50/p99 by kind, lane utilisation, the host's CPU, memory,
// disk and load; on a Ray cluster each node's load, memory and GPU utilisation, a series per
// node), each second for 15 minutes or each minute for 24 hours. The history is not on the event
// stream, so it is read again on a timer (not while the tab is hidden).
import { getJson } from '../api.js';
import { lineChart } from '../charts.js';
import { empty, h } from '../dom.js';

const EVERY_MS = { '1s': 5_000, '1m': 60_000 };
const HOST_READINGS = [['cpu_percent', 'CPU %'], ['memory_percent', 'memory %'], ['disk_percent', 'disk %'], ['load_1m', 'load (1 min)']];

// Each chart: its title, its series' names (from the points, for latency), their values.
const CHARTS = [
  ['jobs', 'Jobs started and ended', () => ['started', 'ended'], (p) => [p.started, p.finished]],
  ['queue', 'Queue depth and 429 refusals', () => ['queued (mean)', 'queued (max)', '429 refusals'],
    (p) => [p.queue_depth, p.queue_depth_max, p.refused]],
  ['latency', 'Run time (s), p50 and p99 by kind', (kinds) => kinds.flatMap((k) => [`${k} p50`, `${k} p99`]),
    (p, kinds) => kinds.flatMap((k) => [p.latency_s[k]?.p50 ?? null, p.latency_s[k]?.p99 ?? null])],
  ['utilisation', 'Lane utilisation (%)', () => ['mean', 'max'],
    (p) => [percent(p.utilisation), percent(p.utilisation_max)]],
  ['host', 'Host', () => HOST_READINGS.map(([, label]) => label),
    (p) => HOST_READINGS.map(([name]) => p.host[name] ?? null)],
];
// Drawn only on a cluster: a series per node of the points.
const NODE_CHARTS = [['load_1m', 'Load per node (1 min)'], ['memory_percent', 'Memory per node (%)'], ['gpu_percent', 'GPU utilisation per node (%)']]
  .map(([reading, title]) => [`nodes-${reading}`, title, (kinds, nodes) => nodes,
    (p, kinds, nodes) => nodes.map((node) => p.nodes?.[node]?.[reading] ?? null)]);

function percent(share) {
  return share === null || share === undefined ? null : Math.round(share * 1000) / 10;
}

export function activityCharts() {
  const resolution = h('select', { id: 'history-resolution', name: 'history-resolution' },
    h('option', { value: '1s' }, 'each second, 15 min'), h('option', { value: '1m' }, 'each minute, 24 h'));
  const grid = h('div', { class: 'history-charts', id: 'history' }, empty('Reading the history…'));
  const el = h('div', {}, h('label', { for: 'history-resolution' }, 'Resolution ', resolution), grid);
  let charts = null; // with the kinds and nodes they were made for, and which they are
  let timer = null;
  let stopped = false;

  function build(key, kinds, nodes) {
    charts?.all.forEach((chart) => chart.destroy());
    grid.replaceChildren();
    const drawn = nodes.length ? [...CHARTS, ...NODE_CHARTS] : CHARTS;
    const all = drawn.map(([name, title, names]) => {
      const box = h('div', { class: 'history-chart', 'data-chart': name });
      grid.append(box);
      return lineChart(box, title, 'time', names(kinds, nodes), { time: true, height: 150 });
    });
    charts = { key, all, drawn };
  }

  async function load() {
    if (stopped) return;
    if (!document.hidden) {
      try {
        const { points } = await getJson(`/v1/history?resolution=${resolution.value}`);
        const kinds = [...new Set(points.flatMap((p) => Object.keys(p.latency_s)))].sort();
        const nodes = [...new Set(points.flatMap((p) => Object.keys(p.nodes ?? {})))].sort();
        const key = `${kinds.join(',')}|${nodes.join(',')}`;
        if (!charts || charts.key !== key) build(key, kinds, nodes);
        const times = points.map((p) => p.at);
        if (points.length) charts.drawn.forEach(([, , , values], i) => {
          const columns = points.map((p) => values(p, kinds, nodes));
          const series = columns.length ? columns[0].map((_, s) => columns.map((row) => row[s])) : [];
          charts.all[i].update([times, ...series]);
        });
        grid.dataset.points = String(points.length);
        grid.dataset.last = String(times[times.length - 1] ?? '');
      } catch (error) {
        grid.replaceChildren(empty(`Could not read the history: ${error.message}`));
        charts = null;
      }
    }
    if (!stopped) timer = setTimeout(load, EVERY_MS[resolution.value]);
  }

  resolution.addEventListener('change', () => {
    clearTimeout(timer);
    load();
  });
  load();
  return {
    el,
    stop() {
      stopped = true;
      clearTimeout(timer);
      charts?.all.forEach((chart) => chart.destroy());
    },
  };
}
