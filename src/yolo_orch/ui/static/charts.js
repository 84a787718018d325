// Charts: training curves with uPlot (vendored, global `uPlot`), and tiny sparklines.

const PALETTE = ['#2563eb', '#d97706', '#059669', '#db2777', '#7c3aed', '#0891b2'];
const DASHES = [[], [6, 3], [2, 2], [8, 3, 2, 3], [1, 3], [10, 4]];

// Steps between ticks on an axis of whole numbers (epochs): never 1.1, 1.2, ...
const WHOLE_STEPS = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10000];

// One line per series, each with its own dash so that it reads without colour too. `time`: the
// x values are Unix seconds, shown as times of day; `wholeX`: they are whole numbers (epochs),
// ticked only at whole numbers; `height`: smaller for the overview's charts.
export function lineChart(el, title, xLabel, series, { time = false, wholeX = false, height = 240 } = {}) {
  const width = Math.max(260, el.clientWidth || 600);
  const options = {
    title,
    width,
    height,
    scales: { x: { time } },
    axes: [wholeX ? { label: xLabel, incrs: WHOLE_STEPS } : { label: xLabel }, {}],
    // The values the x axis was ticked at, said on the element (uPlot 1.6 keeps them on the
    // axis; the canvas does not say them): what a test of the ticks reads.
    hooks: { draw: [(u) => { el.dataset.xTicks = (u.axes[0]._splits ?? []).join(','); }] },
    series: [
      { label: xLabel },
      ...series.map((name, i) => ({
        label: name,
        stroke: PALETTE[i % PALETTE.length],
        dash: DASHES[i % DASHES.length],
        width: 2,
        points: { show: true, size: 5 },
      })),
    ],
  };
  const chart = new window.uPlot(options, [[], ...series.map(() => [])], el);
  const resize = new ResizeObserver(() => {
    chart.setSize({ width: Math.max(260, el.clientWidth), height });
  });
  resize.observe(el);
  return {
    update(data) {
      chart.setData(data);
    },
    destroy() {
      resize.disconnect();
      chart.destroy();
    },
  };
}

// A sparkline of `values` (nulls skipped) on a small canvas.
export function sparkline(values, { max = null, label = '' } = {}) {
  const canvas = document.createElement('canvas');
  canvas.className = 'sparkline';
  canvas.width = 160;
  canvas.height = 32;
  canvas.setAttribute('role', 'img');
  const known = values.filter((v) => v !== null && v !== undefined);
  canvas.setAttribute('aria-label', known.length
    ? `${label}: last ${known.length} samples, from ${known[0]} to ${known[known.length - 1]}`
    : `${label}: no samples`);
  const ctx = canvas.getContext('2d');
  if (known.length < 2) return canvas;
  const top = max ?? Math.max(...known, 1);
  ctx.strokeStyle = getComputedStyle(document.documentElement).getPropertyValue('--accent') || '#2563eb';
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  let started = false;
  values.forEach((value, i) => {
    if (value === null || value === undefined) return;
    const x = (i / (values.length - 1)) * (canvas.width - 2) + 1;
    const y = canvas.height - 2 - (value / top) * (canvas.height - 4);
    if (started) ctx.lineTo(x, y);
    else ctx.moveTo(x, y);
    started = true;
  });
  ctx.stroke();
  return canvas;
}
