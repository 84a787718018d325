// The page's one server-wide stream, GET /v1/events: every job's changes, shared by the views.
import { follow } from './api.js';

const listeners = new Set();
let controller = null;

export function onLive(listener) {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

function tell(type, data) {
  for (const listener of [...listeners]) listener(type, data);
}

export function startLive(setState) {
  controller?.abort();
  controller = new AbortController();
  setState('connecting');
  follow('/v1/events', {
    signal: controller.signal,
    onOpen: () => setState('live'),
    onDrop: (_error, final) => setState(final ? 'off' : 'reconnecting'),
    onEvent: (type, data) => {
      if (type === 'resync') tell('resync', null);
      else if (type === 'job' || type === 'deleted') tell(type, data);
    },
  });
}
