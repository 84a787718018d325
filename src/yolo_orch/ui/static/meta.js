// What the server defines, read from GET /v1/meta before any view is drawn: the job states and
// which are terminal, the kinds with their params' JSON schema, the error codes. No script
// keeps a copy of its own.
import { getJson } from './api.js';

let current = null;

// Resolves once the server's meta is read; asks again after a failure (a token given since).
export async function loadMeta() {
  current ??= await getJson('/v1/meta');
  return current;
}

// The meta read by `loadMeta`: the views are drawn only after it resolved.
export function meta() {
  return current;
}

export function isTerminal(state) {
  return current.terminal_states.includes(state);
}

export function kindMeta(kind) {
  return current.kinds.find((entry) => entry.kind === kind);
}
