// Submit: drop images onto the page to run an inference job with a chosen model and params,
// then watch it run and see what it found. The params' fields come from the server's schema.
import { follow, getJson, request } from '../api.js';
import { h, progressBar, section, shortId, stateBadge, updateProgress } from '../dom.js';
import { isTerminal, kindMeta } from '../meta.js';
import { showStatus } from '../status.js';
import { paramFields } from './params.js';
import { inferenceResults } from './results.js';

export function renderSubmit(main) {
  const controller = new AbortController();
  const files = h('input', { type: 'file', id: 'images', name: 'images', multiple: true, accept: 'image/*' });
  const drop = h('label', { class: 'drop', for: 'images', id: 'drop' },
    h('span', {}, 'Drop images here, or choose them: '), files);
  const chosen = h('p', { class: 'muted', id: 'chosen' }, 'No images chosen.');
  const model = h('select', { id: 'model', name: 'model', required: true });
  const inference = kindMeta('inference');
  const params = paramFields(inference.params);
  const extra = h('input', { type: 'text', id: 'extra', name: 'extra', placeholder: '{"param": value, ...}', spellcheck: 'false' });
  const form = h('form', { class: 'submit', id: 'submit-form' },
    drop, chosen,
    h('label', { for: 'model' }, 'Model ', model),
    h('fieldset', { class: 'params', id: 'params' }, h('legend', {}, 'Parameters (empty: the server\'s default)'),
      h('div', { class: 'param-grid' }, params.labels)),
    h('label', { for: 'extra' }, 'More params (JSON) ', extra),
    h('button', { type: 'submit' }, 'Run inference'));
  const watch = h('div', { id: 'watch' });
  main.append(h('h1', {}, 'Submit'), section('Inference on your images', form), watch);
  let picked = [];

  const pick = (list) => {
    picked = [...list].filter((f) => f.type.startsWith('image/') || /\.(jpe?g|png|bmp|webp|tiff?)$/i.test(f.name));
    chosen.textContent = picked.length ? `${picked.length} image(s): ${picked.map((f) => f.name).join(', ')}` : 'No images chosen.';
  };
  files.addEventListener('change', () => pick(files.files));
  for (const name of ['dragenter', 'dragover']) {
    drop.addEventListener(name, (event) => {
      event.preventDefault();
      drop.classList.add('over');
    });
  }
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (event) => {
    event.preventDefault();
    drop.classList.remove('over');
    pick(event.dataTransfer.files);
  });

  getJson('/v1/models').then(({ models }) => {
    const names = [...inference.runtime_models, ...models.filter((m) => m.usable).map((m) => m.name)];
    model.replaceChildren(...names.map((n) => h('option', { value: n }, n)));
    if (!names.length) model.append(h('option', { value: '' }, 'no model: import one first'));
  }).catch(() => {});

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (!picked.length) return showStatus('choose or drop at least one image');
    let given;
    try {
      given = extra.value.trim() ? JSON.parse(extra.value) : {};
    } catch {
      return showStatus('More params is not a JSON object');
    }
    const data = new FormData();
    data.append('model', model.value);
    data.append('params', JSON.stringify({ ...given, ...params.read() }));
    for (const file of picked) data.append('images', file, file.name);
    try {
      const job = await (await request('/v1/jobs/inference', { method: 'POST', body: data })).json();
      showStatus('');
      watchJob(watch, job, controller.signal);
    } catch (error) {
      if (error.status !== 401 && error.status !== 403) showStatus(`refused: ${error.message}`);
    }
  });
  return () => controller.abort();
}

function watchJob(box, job, signal) {
  const badge = h('span', {}, stateBadge(job.state));
  const bar = progressBar(job);
  const results = h('div', {});
  box.replaceChildren(section(`Job ${shortId(job.id)}`,
    h('p', {}, badge, ' ', bar, ' ', h('a', { href: `#/jobs/${job.id}` }, 'Open the job page')), results));
  follow(`/v1/jobs/${job.id}/events`, {
    signal,
    endless: false,
    onEvent: (_type, current) => {
      badge.replaceChildren(stateBadge(current.state, current.cancel_requested));
      updateProgress(bar, current);
      if (current.state === 'succeeded') results.replaceChildren(inferenceResults(job.id));
      else if (isTerminal(current.state) && current.error) results.replaceChildren(h('p', {}, `${current.error.code}: ${current.error.message}`));
    },
  });
}
