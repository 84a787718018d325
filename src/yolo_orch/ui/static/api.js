// The API client: every request carries the bearer token the user gave (kept in
// sessionStorage), and 401 / 403 answers are reported to the page.
import { fetchEventSource } from './vendor/fetch-event-source/fetch.js';

export const ROOT = document.querySelector('meta[name="yolo-orch-root"]')?.content ?? '';
const TOKEN_KEY = 'yolo-orch-token';

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY) ?? '',
  set: (value) => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

export class ApiError extends Error {
  constructor(status, problem, path) {
    const detail = problem?.detail ?? problem?.title ?? `HTTP ${status}`;
    super(`${status}: ${detail}`);
    this.status = status;
    this.problem = problem;
    this.path = path;
  }
}

const authListeners = new Set();
export function onAuthProblem(listener) {
  authListeners.add(listener);
}

function authHeaders() {
  const value = token.get();
  return value ? { Authorization: `Bearer ${value}` } : {};
}

async function problemOf(response) {
  try {
    return await response.json();
  } catch {
    return null;
  }
}

function failed(status, problem, path) {
  const error = new ApiError(status, problem, path);
  if (status === 401 || status === 403) authListeners.forEach((listener) => listener(error));
  return error;
}

export async function request(path, { method = 'GET', json, body, headers = {} } = {}) {
  const sent = { ...authHeaders(), ...headers };
  if (json !== undefined) {
    sent['Content-Type'] = 'application/json';
    body = JSON.stringify(json);
  }
  const response = await fetch(ROOT + path, { method, body, headers: sent });
  if (!response.ok) throw failed(response.status, await problemOf(response), path);
  return response;
}

export async function getJson(path) {
  return (await request(path)).json();
}

// A blob: URL for a file the API serves (images, downloads): <img src> cannot send a token.
export async function blobUrl(path) {
  const response = await request(path);
  return URL.createObjectURL(await response.blob());
}

export async function download(path, name) {
  const url = await blobUrl(path);
  const link = Object.assign(document.createElement('a'), { href: url, download: name });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

class Fatal extends Error {}
class Closed extends Error {}

// Server-sent events through fetch (EventSource cannot send the token). Reconnects after
// a dropped stream with Last-Event-ID; gives up on 401, 403 and 404. Resolves when the
// server ends the stream (`endless` false) or `signal` aborts.
export function follow(path, { onEvent, onOpen, onDrop, signal, endless = true }) {
  return fetchEventSource(ROOT + path, {
    headers: authHeaders(),
    signal,
    openWhenHidden: true,
    async onopen(response) {
      const type = response.headers.get('content-type') ?? '';
      if (response.ok && type.startsWith('text/event-stream')) {
        onOpen?.();
        return;
      }
      const error = failed(response.status, await problemOf(response), path);
      throw [401, 403, 404].includes(response.status) ? new Fatal(error.message) : error;
    },
    onmessage(message) {
      if (!message.event) return;
      onEvent(message.event, message.data ? JSON.parse(message.data) : null);
    },
    onclose() {
      if (endless) throw new Closed('the stream ended');
    },
    onerror(error) {
      if (error instanceof Fatal) throw error;
      onDrop?.(error);
      return 2000;
    },
  }).catch((error) => onDrop?.(error, true));
}

// The Prometheus text of /metrics as {name: [{labels, value}]}.
export function parseMetrics(text) {
  const metrics = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const match = line.match(/^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/);
    if (!match) continue;
    const labels = {};
    for (const pair of (match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
      labels[pair[1]] = pair[2];
    }
    (metrics[match[1]] ??= []).push({ labels, value: Number(match[3]) });
  }
  return metrics;
}
