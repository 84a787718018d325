// A video input of an inference job: its annotated video played (converted by the server to
// WebM: the runner writes MPEG-4 Part 2, which browsers do not play), its frames a page at a time
// with what each found, and its tracks as a timeline, a row per track from its first frame to
// its last.
import { blobUrl, download, getJson } from '../api.js';
import { definitionList, empty, h } from '../dom.js';

const FRAME_PAGE = 20;
const TRACKS_SHOWN = 200;

export function videoResult(jobId, entry, index) {
  const { video } = entry;
  const facts = definitionList([
    ['size', `${entry.width}×${entry.height}`],
    ['frames run', `${video.frames}${video.frame_count !== null ? ` of ${video.frame_count}` : ''}` +
      (video.vid_stride > 1 ? ` (every ${video.vid_stride}th)` : '')],
    ['fps', video.fps],
    ['detections', entry.detections_total ?? '–'],
    ['tracks', entry.tracks ? entry.tracks.count : 'not tracked'],
  ]);
  const player = annotatedVideo(jobId, entry);
  const frames = framePages(jobId, entry, index, player.seek);
  return h('article', { class: 'video-result', 'data-index': index },
    h('h3', {}, entry.source),
    h('div', { class: 'video-body' }, player.el, facts),
    entry.tracks ? trackTimeline(entry) : null,
    h('h4', {}, 'Frames'), frames);
}

function annotatedVideo(jobId, entry) {
  if (!entry.annotated) {
    return { el: empty('No annotated video (the job ran without save_annotated).'), seek: null };
  }
  const player = h('video', {
    class: 'annotated', controls: true, muted: true, preload: 'auto', playsinline: true,
    'aria-label': `Annotated video of ${entry.source}`,
  });
  const note = h('p', { class: 'muted' }, 'Converting the annotated video for the browser…');
  const original = h('button', {
    type: 'button',
    class: 'small',
    onclick: () => download(`/v1/jobs/${jobId}/artifacts/${encodeURIComponent(entry.annotated)}`, entry.annotated),
  }, `Download ${entry.annotated}`);
  blobUrl(`/v1/jobs/${jobId}/playable/${encodeURIComponent(entry.annotated)}`)
    .then((url) => {
      player.src = url;
      note.textContent = entry.annotated_codec
        ? `Shown as WebM: the file is ${entry.annotated_codec} (MPEG-4 Part 2), which browsers do not play.`
        : '';
    })
    .catch((error) => { note.textContent = `Could not load the video: ${error.message}`; });
  const first = entry.video.first_frame ?? 0;
  return {
    el: h('figure', { class: 'video-frame' }, player, h('figcaption', {}, note, ' ', original)),
    // Frame numbers count the input's frames; the annotated video holds the frames run, at
    // the input's rate divided by the stride: frame f is at (f - first) / fps seconds.
    seek(frame) {
      player.currentTime = Math.max(0, (frame - first) / entry.video.fps);
    },
  };
}

function framePages(jobId, entry, index, seek) {
  const rows = h('tbody', {});
  const where = h('span', { class: 'muted' });
  const previous = h('button', { type: 'button', class: 'small', disabled: true }, 'Previous frames');
  const next = h('button', { type: 'button', class: 'small', disabled: true }, 'Next frames');
  const table = h('div', { class: 'scroll' }, h('table', { class: 'frames' },
    h('thead', {}, h('tr', {}, ['Frame', 'Time', 'Found', 'What'].map((t) => h('th', { scope: 'col' }, t)))),
    rows));
  let offset = 0;

  async function load(at) {
    previous.disabled = next.disabled = true;
    try {
      const page = await getJson(`/v1/jobs/${jobId}/result?entry=${index}&offset=${at}&limit=${FRAME_PAGE}`);
      offset = page.offset;
      rows.replaceChildren(...page.frames.map((frame) => frameRow(frame, seek)));
      if (!page.frames.length) rows.append(h('tr', {}, h('td', { colspan: 4 }, 'No frames.')));
      const last = page.offset + page.frames.length;
      where.textContent = page.total ? `frames ${page.offset + 1}–${last} of ${page.total} run` : '';
      previous.disabled = page.offset === 0;
      next.disabled = page.next_offset === null;
      table.dataset.offset = String(page.offset);
    } catch (error) {
      rows.replaceChildren(h('tr', {}, h('td', { colspan: 4 }, `Could not read the frames: ${error.message}`)));
    }
  }
  previous.addEventListener('click', () => load(Math.max(0, offset - FRAME_PAGE)));
  next.addEventListener('click', () => load(offset + FRAME_PAGE));
  load(0);
  return h('div', { class: 'frame-pages' }, h('div', { class: 'pager' }, previous, next, where), table);
}

function frameRow(frame, seek) {
  const found = frame.detections ?? frame.classes ?? [];
  const time = `${frame.time_s.toFixed(2)} s`;
  return h('tr', { 'data-frame': frame.frame },
    h('td', {}, seek
      ? h('button', { type: 'button', class: 'small', 'aria-label': `Show frame ${frame.frame} in the video`, onclick: () => seek(frame.frame) }, String(frame.frame))
      : String(frame.frame)),
    h('td', {}, time),
    h('td', {}, String(found.length)),
    h('td', {}, found.length ? summary(found) : 'nothing found'));
}

// "red ×3 (tracks 1, 2, 3), blue ×1": per class, with the track ids where tracked.
function summary(found) {
  const byClass = new Map();
  for (const d of found) {
    const name = d.class_name ?? String(d.class_id);
    const entry = byClass.get(name) ?? { count: 0, tracks: [] };
    entry.count += 1;
    if (d.track_id !== undefined && d.track_id !== null) entry.tracks.push(d.track_id);
    byClass.set(name, entry);
  }
  return [...byClass].map(([name, { count, tracks }]) =>
    `${name} ×${count}${tracks.length ? ` (track${tracks.length > 1 ? 's' : ''} ${tracks.join(', ')})` : ''}`).join(', ');
}

// A row per track: a bar from its first frame to its last, over the frames the job ran.
function trackTimeline(entry) {
  const { tracks } = entry.tracks;
  const start = entry.video.first_frame ?? 0;
  const end = Math.max(entry.video.last_frame ?? start, start + 1);
  const span = end - start;
  const shown = tracks.slice(0, TRACKS_SHOWN);
  const rows = shown.map((track) => {
    const bar = h('span', {
      class: 'track-bar',
      title: `track ${track.track_id}: frames ${track.first_frame}–${track.last_frame}, tracked on ${track.frames}`,
    });
    bar.style.marginLeft = `${((track.first_frame - start) / span) * 100}%`;
    bar.style.width = `${Math.max(0.5, ((track.last_frame - track.first_frame) / span) * 100)}%`;
    return h('tr', { 'data-track': track.track_id },
      h('th', { scope: 'row' }, `#${track.track_id}`),
      h('td', {}, track.class_name),
      h('td', { class: 'mono' }, `${track.first_frame}–${track.last_frame}`),
      h('td', {}, String(track.frames)),
      h('td', { class: 'track-lane' }, bar));
  });
  const perClass = Object.entries(entry.tracks.per_class).map(([name, n]) => `${name}: ${n}`).join(', ');
  return h('div', { class: 'tracks' },
    h('h4', {}, `Tracks (${entry.tracks.count}${perClass ? `; ${perClass}` : ''})`),
    tracks.length ? h('div', { class: 'scroll' }, h('table', { class: 'track-timeline' },
      h('thead', {}, h('tr', {},
        ['Track', 'Class', 'Frames', 'Tracked on'].map((t) => h('th', { scope: 'col' }, t)),
        h('th', { scope: 'col', class: 'track-lane' }, `frame ${start} → ${end}`))),
      h('tbody', {}, rows))) : empty('No tracks.'),
    tracks.length > shown.length ? h('p', { class: 'muted' }, `The first ${shown.length} of ${tracks.length} tracks.`) : null);
}
