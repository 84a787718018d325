// An inference job's images as thumbnails with what was found drawn over them (click to
// enlarge), and the detections table; a page of the result at a time. A video input is shown
// as a video of its own (result_video.js), never as a thumbnail: it has no image to draw on.
import { blobUrl, getJson } from '../api.js';
import { drawEntry } from '../draw.js';
import { empty, h } from '../dom.js';
import { videoResult } from './result_video.js';

const PAGE = 24;
const THUMB = 220;
const LARGE = 1000;

export function inferenceResults(jobId) {
  const grid = h('div', { class: 'thumbs' });
  const rows = h('tbody', {});
  const table = h('div', { class: 'scroll' }, h('table', { class: 'detections' },
    h('thead', {}, h('tr', {}, ['Image', 'Class', 'Confidence', 'Where'].map((t) => h('th', { scope: 'col' }, t)))),
    rows));
  const more = h('button', { type: 'button', hidden: true }, 'More images');
  const videos = h('div', { class: 'videos' });
  const box = h('div', { class: 'inference' }, videos, grid, more, h('h3', {}, 'Detections'), table);
  let offset = 0;

  async function load() {
    try {
      const page = await getJson(`/v1/jobs/${jobId}/result?offset=${offset}&limit=${PAGE}`);
      page.images.forEach((entry, i) => {
        if (entry.video) videos.append(videoResult(jobId, entry, page.offset + i));
        else grid.append(thumbnail(jobId, entry, page.offset + i));
        rows.append(...detectionRows(entry));
      });
      grid.hidden = !grid.childElementCount && page.total > 0;
      if (!page.total) grid.append(empty('No images in the result.'));
      offset = page.next_offset ?? offset;
      more.hidden = page.next_offset === null;
    } catch (error) {
      grid.append(empty(`Could not read the result: ${error.message}`));
    }
  }
  more.addEventListener('click', load);
  load();
  return box;
}

function thumbnail(jobId, entry, index) {
  const canvas = h('canvas', { class: 'thumb-canvas', 'data-detections': (entry.detections ?? []).length });
  const caption = h('figcaption', {}, entry.source, entry.error ? ` – ${entry.error}` : '');
  const button = h('button', { type: 'button', class: 'thumb', 'aria-label': `Enlarge ${entry.source}` }, canvas);
  const figure = h('figure', { 'data-index': index }, button, caption);
  if (entry.error) {
    button.disabled = true;
    return figure;
  }
  const image = loadImage(jobId, entry, index);
  image.then((img) => {
    drawEntry(canvas, img, entry, THUMB);
    figure.dataset.drawn = img ? 'image' : 'outline';
  });
  button.addEventListener('click', async () => {
    const dialog = document.getElementById('zoom');
    const large = h('canvas', { class: 'zoom-canvas' });
    drawEntry(large, await image, entry, LARGE);
    dialog.querySelector('.zoom-body').replaceChildren(large, h('p', {}, entry.source));
    dialog.showModal();
  });
  return figure;
}

// The uploaded input (drawn over), else the annotated artifact, else nothing (outlines only).
async function loadImage(jobId, entry, index) {
  const sources = [`/v1/jobs/${jobId}/inputs/${index}`];
  if (entry.annotated) sources.push(`/v1/jobs/${jobId}/artifacts/${encodeURIComponent(entry.annotated)}`);
  for (const source of sources) {
    try {
      const url = await blobUrl(source);
      const img = new Image();
      img.src = url;
      await img.decode();
      return img;
    } catch { /* the next source */ }
  }
  return null;
}

function detectionRows(entry) {
  if (entry.video) {
    const tracks = entry.tracks ? `, ${entry.tracks.count} track(s)` : '';
    return [h('tr', { 'data-video': entry.source }, h('td', {}, entry.source),
      h('td', { colspan: 3 }, `video: ${entry.detections_total ?? 'no'} detection(s) over ${entry.video.frames} frame(s)${tracks}; its frames and tracks above`))];
  }
  const found = entry.detections ?? entry.classes ?? [];
  if (!found.length) return [h('tr', {}, h('td', {}, entry.source), h('td', { colspan: 3 }, entry.error ?? 'nothing found'))];
  return found.map((d) => h('tr', {},
    h('td', {}, entry.source),
    h('td', {}, d.class_name),
    h('td', {}, d.confidence !== undefined ? d.confidence.toFixed(3) : `${(d.pixel_ratio * 100).toFixed(1)} % of pixels`),
    h('td', { class: 'mono' }, where(d))));
}

function where(d) {
  if (d.box) return [d.box.x1, d.box.y1, d.box.x2, d.box.y2].map((v) => Math.round(v)).join(', ');
  if (d.obb) return `${Math.round(d.obb.cx)}, ${Math.round(d.obb.cy)} ${Math.round(d.obb.w)}×${Math.round(d.obb.h)}`;
  return '–';
}
