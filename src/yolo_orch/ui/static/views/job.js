// One job: its place in the queue while queued, parameters, timeline, error, live log tail, and what its kind produced
// (training curves and the model registered, validation scores per class with the confusion
// matrix, inference pictures and videos, the exported variant to download, a tune's trials, a
// stream's snapshot and counts), artifacts.
import { download, follow, getJson, request } from '../api.js';
import { lineChart } from '../charts.js';
import { definitionList, empty, fmtBytes, fmtDuration, fmtTime, h, progressBar, section, shortId, stateBadge } from '../dom.js';
import { onLive } from '../live.js';
import { isTerminal } from '../meta.js';
import { jobActions } from './actions.js';
import { chainSection } from './chain.js';
import { exportResult, trainingResult } from './result_model.js';
import { tuneResult } from './result_tune.js';
import { validationResult } from './result_validation.js';
import { inferenceResults } from './results.js';
import { queuePlace } from './queue.js';
import { streamCard } from './streams.js';

export function renderJob(main, jobId) {
  const controller = new AbortController();
  const head = h('div', { class: 'job-head' });
  const facts = h('div', { class: 'facts' });
  const kindBox = h('div', {});
  const logBox = h('pre', { class: 'log', id: 'log', tabindex: 0, 'aria-label': 'Job log' });
  const artifactsBox = h('div', {});
  const place = queuePlace(jobId);
  // Other jobs starting or leaving move this one up: its place is read again as they change.
  const stopLive = onLive((type) => {
    if (job && type !== 'resync') place.seen(job);
  });
  main.append(
    h('h1', {}, 'Job ', h('span', { class: 'mono' }, shortId(jobId))),
    head, place.el, facts, kindBox,
    section('Log', logBox),
    section('Artifacts', artifactsBox),
  );
  let job = null;
  let shownFinished = false;
  let charts = null;
  let stream = null;
  let chain = null;
  const refreshLog = throttle(async () => {
    try {
      const text = await (await request(`/v1/jobs/${jobId}/logs`)).text();
      const atEnd = logBox.scrollTop + logBox.clientHeight >= logBox.scrollHeight - 8;
      logBox.textContent = text.split('\n').slice(-400).join('\n') || '(empty)';
      if (atEnd) logBox.scrollTop = logBox.scrollHeight;
    } catch (error) {
      logBox.textContent = `Could not read the log: ${error.message}`;
    }
  }, 1000);
  const refreshCurves = throttle(async () => {
    const history = await getJson(`/v1/jobs/${jobId}/metrics`);
    charts?.update(history);
  }, 1000);

  function show(next) {
    const first = job === null;
    const moved = first || job.state !== next.state;
    job = next;
    place.seen(job);
    head.replaceChildren(stateBadge(job.state, job.cancel_requested), ' ', progressBar(job), ' ',
      jobActions(job, { onDeleted: () => { window.location.hash = '#/jobs'; } }));
    facts.replaceChildren(parameters(job), timeline(job));
    if (job.error) facts.append(section('Error', definitionList([['code', job.error.code], ['message', job.error.message]])));
    if (first && job.chain_id) {
      chain = chainSection(job);
      facts.after(chain.el);
    }
    if (first && job.kind === 'training') {
      charts = trainingCharts(kindBox);
    }
    if (job.kind === 'training') refreshCurves();
    if (first && job.kind === 'stream') {
      stream = streamCard(job);
      kindBox.append(section('Stream', stream.el));
    } else {
      stream?.update(job);
    }
    // A stream's progress comes every second for as long as it runs: its log is read again
    // only when its state changes, not with every frame count.
    if (job.kind !== 'stream' || moved) refreshLog();
    if (isTerminal(job.state) && !shownFinished) {
      shownFinished = true;
      finished(job);
    }
  }

  // Each kind's result, drawn from what GET /v1/jobs/{id}/result holds.
  const results = {
    validation: validationResult,
    export: exportResult,
    training: trainingResult,
    tune: tuneResult,
  };
  let resultBox = null;

  async function finished(done) {
    loadArtifacts(jobId, artifactsBox);
    if (done.state !== 'succeeded') return;
    if (done.kind === 'inference') kindBox.append(section('Images', inferenceResults(jobId)));
    const show = results[done.kind];
    if (!show) return;
    try {
      resultBox = await show(jobId);
      if (controller.signal.aborted) resultBox.dispose?.();
      else kindBox.append(resultBox);
    } catch (error) {
      kindBox.append(section('Result', empty(`Could not read the result: ${error.message}`)));
    }
  }

  getJson(`/v1/jobs/${jobId}`).then((current) => {
    show(current);
    if (!isTerminal(current.state)) {
      follow(`/v1/jobs/${jobId}/events`, {
        signal: controller.signal,
        endless: false,
        // The job itself comes as `state` and `progress`; any other event is not the job.
        onEvent: (type, data) => {
          if (type === 'state' || type === 'progress') show(data);
        },
      });
    }
  }).catch((error) => {
    head.replaceChildren(empty(error.status === 404 ? 'No such job (it may have been deleted).' : `Could not read the job: ${error.message}`));
  });
  return () => {
    controller.abort();
    stopLive();
    place.stop();
    charts?.destroy();
    stream?.dispose();
    chain?.dispose();
    resultBox?.dispose?.();
  };
}

function parameters(job) {
  const entries = [['kind', job.kind], ['model', job.model], ['priority', job.priority], ['GPUs', job.gpus]];
  // A model named by alias or by the job producing it: the one it ran, once it started.
  if (job.model_id && job.model_id !== job.model) entries.push(['model id', job.model_id]);
  if (job.waiting) entries.push(['waiting', 'for the jobs of its after / after_ok']);
  if (job.inputs) entries.push(['inputs', job.inputs.length > 6 ? `${job.inputs.slice(0, 6).join(', ')} … (${job.inputs.length})` : job.inputs.join(', ')]);
  if (job.sources) entries.push(['sources', job.sources.join(', ')]); // as the API gives them: redacted
  if (job.dataset) entries.push(['dataset', job.dataset]);
  if (job.split) entries.push(['split', job.split]);
  entries.push(['params', h('code', {}, JSON.stringify(job.params))]);
  return section('Parameters', definitionList(entries));
}

function timeline(job) {
  return section('Timeline', definitionList([
    ['created', fmtTime(job.created_at)],
    ['started', fmtTime(job.started_at)],
    ['attempts', `${job.attempt} of ${job.max_attempts}`],
    ['devices', job.devices.join(', ') || '–'],
    ['finished', fmtTime(job.finished_at)],
    ['ran for', job.started_at ? fmtDuration(job.started_at, job.finished_at) : '–'],
  ]));
}

const lossTotal = (loss) => (loss && typeof loss === 'object'
  ? Object.values(loss).reduce((a, b) => a + b, 0)
  : loss ?? null);

function trainingCharts(box) {
  const lossEl = h('div', { class: 'chart', id: 'loss-chart' });
  const scoreEl = h('div', { class: 'chart', id: 'score-chart' });
  const note = h('p', { class: 'muted' }, 'Waiting for the first epoch…');
  box.append(section('Training curves', note, h('div', { class: 'charts' }, lossEl, scoreEl)));
  const losses = lineChart(lossEl, 'Loss per epoch (sum of parts)', 'epoch', ['train loss', 'val loss'], { wholeX: true });
  const scores = lineChart(scoreEl, 'Scores per epoch', 'epoch', ['mAP50', 'mAP50-95', 'precision', 'recall'], { wholeX: true });
  return {
    update(history) {
      if (!history.length) return;
      note.textContent = `${history.length} epoch(s).`;
      const epochs = history.map((e) => e.epoch);
      losses.update([epochs, history.map((e) => lossTotal(e.train_loss)), history.map((e) => lossTotal(e.val_loss))]);
      scores.update([epochs, ...['mAP50', 'mAP50-95', 'precision', 'recall'].map((k) => history.map((e) => e[k] ?? null))]);
      lossEl.dataset.points = scoreEl.dataset.points = String(history.length);
    },
    destroy() {
      losses.destroy();
      scores.destroy();
    },
  };
}

async function loadArtifacts(jobId, box) {
  try {
    const { artifacts } = await getJson(`/v1/jobs/${jobId}/artifacts`);
    box.replaceChildren(artifacts.length
      ? h('ul', { class: 'artifacts' }, artifacts.map((a) => h('li', {},
        h('button', { type: 'button', class: 'small', onclick: () => download(a.url, a.name) }, `Download ${a.name}`),
        ` ${fmtBytes(a.size_bytes)}`)))
      : empty('No artifacts.'));
  } catch (error) {
    box.replaceChildren(empty(`Could not list artifacts: ${error.message}`));
  }
}

function throttle(fn, ms) {
  let last = 0;
  let timer = null;
  return () => {
    const wait = last + ms - Date.now();
    if (wait <= 0) {
      last = Date.now();
      fn();
    } else if (!timer) {
      timer = setTimeout(() => {
        timer = null;
        last = Date.now();
        fn();
      }, wait);
    }
  };
}
