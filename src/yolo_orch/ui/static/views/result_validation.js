// A validation job's result: its scores, the per-class table (its columns those the result's
// rows have: they differ by task), each class's scores charted with uPlot, the curves (PR, F1,
// P, R) and the confusion matrix as a heatmap table. The curves are drawn with uPlot from the
// points the result holds (`curves`: [{name, x_label, y_label, x, y: {class: values}}]); a
// result without them (made before they were kept) shows ultralytics' pictures of them.
import { getJson, request } from '../api.js';
import { lineChart } from '../charts.js';
import { definitionList, empty, h, section } from '../dom.js';

const PALETTE = ['#2563eb', '#d97706', '#059669', '#db2777', '#7c3aed', '#0891b2'];
const POINTS = [[], [6, 3], [2, 2], [8, 3, 2, 3], [1, 3], [10, 4]];

export async function validationResult(jobId) {
  const result = await getJson(`/v1/jobs/${jobId}/result`);
  const metrics = Object.entries(result.metrics ?? {}).map(([k, v]) => [k, score(v)]);
  const speed = Object.entries(result.speed_ms_per_image ?? {}).map(([k, v]) => `${k} ${v} ms`).join(', ');
  const box = section('Validation', definitionList([
    ['task', result.task], ['split', result.split], ['images', result.images], ...metrics,
    ['speed per image', speed || '–'],
  ]));
  const charts = [];
  const rows = result.per_class ?? [];
  box.append(h('h3', {}, `Per class (${rows.length})`), rows.length ? perClassTable(rows) : empty('No per-class rows.'));
  const chartEl = h('div', { class: 'chart', id: 'per-class-chart' });
  if (rows.length) {
    box.append(chartEl);
    const chart = perClassChart(chartEl, rows);
    if (chart) charts.push(chart);
  }
  const curves = (result.artifacts ?? []).filter((name) => /curve.*\.png$/i.test(name));
  if (result.curves?.length) {
    const grid = h('div', { class: 'charts curve-charts' });
    box.append(h('h3', {}, 'Curves'), grid);
    result.curves.forEach((curve, i) => {
      const el = h('div', { class: 'chart curve-chart', 'data-curve': curve.name, id: `curve-${i}` });
      grid.append(el);
      const names = Object.keys(curve.y);
      const chart = lineChart(el, curve.name, curve.x_label, names, { height: 260 });
      chart.update([curve.x, ...names.map((n) => curve.y[n])]);
      el.dataset.series = String(names.length);
      charts.push(chart);
    });
  } else if (curves.length) {
    box.append(h('h3', {}, 'Curves'), h('div', { class: 'curve-plots' }, curves.map((name) => plotImage(jobId, name))));
  }
  if (result.confusion_matrix) {
    box.append(h('h3', {}, 'Confusion matrix'), matrixHeatmap(result.confusion_matrix));
  }
  box.dispose = () => charts.forEach((chart) => chart.destroy());
  return box;
}

function score(v) {
  return v === null || v === undefined ? '–' : Number(v).toFixed(4);
}

function cell(v) {
  return typeof v === 'number' && !Number.isInteger(v) ? v.toFixed(3) : String(v ?? '–');
}

// The class name first, then the columns as the result names them.
function columnsOf(rows) {
  const keys = [];
  for (const row of rows) for (const key of Object.keys(row)) if (!keys.includes(key)) keys.push(key);
  const name = nameKey(keys);
  return [name, ...keys.filter((k) => k !== name)];
}

function nameKey(keys) {
  return keys.find((k) => /^class$/i.test(k)) ?? keys.find((k) => /class|name/i.test(k)) ?? keys[0];
}

function perClassTable(rows) {
  const columns = columnsOf(rows);
  return h('div', { class: 'scroll' }, h('table', { class: 'per-class' },
    h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, rows.map((row) => h('tr', { 'data-class': row[columns[0]] },
      h('th', { scope: 'row' }, String(row[columns[0]])),
      columns.slice(1).map((c) => h('td', {}, cell(row[c]))))))));
}

// Each class's scores (the columns whose values lie in 0..1, not the counts) as points over the
// classes, one dashed line per score.
function perClassChart(el, rows) {
  const columns = columnsOf(rows);
  const names = rows.map((row) => String(row[columns[0]]));
  const scores = columns.slice(1).filter((c) => rows.every((row) => typeof row[c] === 'number' && row[c] >= 0 && row[c] <= 1)
    && !/^(images|instances)$/i.test(c));
  if (!scores.length) return null;
  const height = 260;
  const options = {
    title: 'Scores per class',
    width: Math.max(260, el.clientWidth || 600),
    height,
    scales: { x: { time: false, range: [-0.5, names.length - 0.5] }, y: { range: [0, 1] } },
    axes: [
      { label: 'class', incrs: [1], values: (u, splits) => splits.map((i) => names[i] ?? '') },
      { label: 'score' },
    ],
    series: [
      { label: 'class', value: (u, i) => names[i] ?? '' },
      ...scores.map((c, i) => ({
        label: c,
        stroke: PALETTE[i % PALETTE.length],
        dash: POINTS[i % POINTS.length],
        width: 1.5,
        points: { show: true, size: 7 },
      })),
    ],
  };
  const data = [names.map((_, i) => i), ...scores.map((c) => rows.map((row) => row[c]))];
  const chart = new window.uPlot(options, data, el);
  el.dataset.series = scores.join(',');
  el.dataset.points = String(names.length);
  const resize = new ResizeObserver(() => chart.setSize({ width: Math.max(260, el.clientWidth), height }));
  resize.observe(el);
  return { destroy() { resize.disconnect(); chart.destroy(); } };
}

function plotImage(jobId, name) {
  const img = h('img', { class: 'plot', alt: name.replace(/\.png$/i, '').replace(/_/g, ' ') });
  request(`/v1/jobs/${jobId}/artifacts/${encodeURIComponent(name)}`)
    .then((r) => r.blob())
    .then((blob) => { img.src = URL.createObjectURL(blob); })
    .catch(() => { img.alt = `${img.alt} (could not be read)`; });
  return h('figure', {}, img, h('figcaption', { class: 'muted' }, name));
}

// Rows: predicted, columns: true, as the result says. Each cell's shade is its share of its
// column's (true class's) total; the count is written in it, so it reads without colour too.
function matrixHeatmap({ names, matrix, rows = 'predicted', columns = 'true' }) {
  const totals = names.map((_, j) => matrix.reduce((sum, row) => sum + (row[j] ?? 0), 0));
  return h('div', { class: 'scroll' }, h('table', { class: 'matrix heatmap' },
    h('caption', {}, `rows: ${rows}, columns: ${columns}; shade: share of the column`),
    h('thead', {}, h('tr', {}, h('th', {}, ''), names.map((n) => h('th', { scope: 'col' }, n)))),
    h('tbody', {}, matrix.map((row, i) => h('tr', {}, h('th', { scope: 'row' }, names[i]), row.map((v, j) => {
      const td = h('td', { title: `${rows} ${names[i]}, ${columns} ${names[j]}: ${v}` }, Number.isInteger(v) ? String(v) : v.toFixed(2));
      const share = totals[j] ? v / totals[j] : 0;
      td.style.setProperty('--share', `${Math.round(share * 100)}%`);
      if (share > 0.5) td.classList.add('strong');
      return td;
    }))))));
}
