// A stream's latest annotated frame (GET /v1/jobs/{id}/snapshot.jpg), fetched again every few
// seconds: the one request the dashboard repeats on a timer, since the frame is not on the event
// stream. The image goes through `request` (an <img src> could not send the token), with a
// cache-busting query so that no cache hands back an older frame.
import { request } from './api.js';
import { h } from './dom.js';

const FASTEST_S = 2; // a snapshot renewed every second is still fetched only every 2 s
const SLOWEST_S = 10;

// A <figure> that stays hidden until a first frame decoded, and swaps a new frame in only once
// it decoded too: a frame that is missing (404 before the first one) or broken leaves the
// previous one in place, so no broken image is ever shown.
export function snapshotView(jobId, everyS) {
  const img = h('img', { class: 'snapshot', alt: `Latest annotated frame of stream ${jobId.slice(0, 8)}`, hidden: true });
  const note = h('figcaption', { class: 'muted' }, everyS ? 'Waiting for the first snapshot…' : 'Snapshots are off for this stream (snapshot_every_s 0).');
  const figure = h('figure', { class: 'snapshot-frame', 'data-snapshot': 'none' }, img, note);
  const periodMs = Math.min(SLOWEST_S, Math.max(FASTEST_S, everyS || 0)) * 1000;
  let timer = null;
  let shownUrl = null;
  let stopped = !everyS;

  async function load() {
    if (stopped) return;
    if (!document.hidden) {
      try {
        const response = await request(`/v1/jobs/${jobId}/snapshot.jpg?t=${Date.now()}`);
        const url = URL.createObjectURL(await response.blob());
        const probe = new Image();
        probe.src = url;
        try {
          await probe.decode();
        } catch {
          URL.revokeObjectURL(url); // not an image: the previous frame stays
          note.textContent = shownUrl
            ? `${note.dataset.shownAt} (a newer snapshot could not be read)`
            : 'A snapshot came that could not be read; trying again.';
          throw new Error('the snapshot did not decode');
        }
        if (stopped) {
          URL.revokeObjectURL(url);
          return;
        }
        img.src = url;
        if (shownUrl) URL.revokeObjectURL(shownUrl);
        shownUrl = url;
        img.hidden = false;
        figure.dataset.snapshot = 'shown';
        note.dataset.shownAt = `Latest snapshot, ${new Date().toLocaleTimeString()}`;
        note.textContent = note.dataset.shownAt;
      } catch {
        // None yet (404 snapshot_not_found), or a frame that did not come: try again later.
      }
    }
    if (!stopped) timer = setTimeout(load, periodMs);
  }

  load();
  return {
    el: figure,
    // The stream ended (or its view went away): the last frame stays, no more are fetched.
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
    // The figure leaves the page: its frame's blob is let go too.
    dispose() {
      this.stop();
      if (shownUrl) URL.revokeObjectURL(shownUrl);
      shownUrl = null;
    },
  };
}
