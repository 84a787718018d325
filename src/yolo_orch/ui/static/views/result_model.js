// What an export or a training made: the variant (its format, size, digests, lineage, whether it
// is usable) with a link to download it, and the model a training registered, linked to its page.
import { ROOT, download, getJson } from '../api.js';
import { definitionList, empty, fmtBytes, h, section } from '../dom.js';

export async function exportResult(jobId) {
  const result = await getJson(`/v1/jobs/${jobId}/result`);
  if (!result.variant) {
    return section('Export', definitionList([
      ['format', result.format],
      ['variant', 'none (simulated)'],
    ]));
  }
  return section('Export', await variantCard(jobId, result.variant));
}

export async function trainingResult(jobId) {
  const result = await getJson(`/v1/jobs/${jobId}/result`);
  const model = result.model;
  const box = section('Model', model
    ? definitionList([
      ['registered as', h('a', { href: `#/models/${encodeURIComponent(model.name)}`, id: 'trained-model' }, model.name)],
      ['id', h('span', { class: 'mono' }, model.id)],
      ['task', model.task],
      ['classes', (model.class_names ?? []).join(', ')],
      ['size', fmtBytes(model.size_bytes)],
      ['sha256', h('span', { class: 'mono' }, model.sha256)],
      ['epochs', result.epochs],
    ])
    : empty('No model registered (the simulated runtime registers none).'));
  for (const variant of result.variants ?? []) box.append(h('h3', {}, `Variant: ${variant.format}`), await variantCard(jobId, variant));
  return box;
}

// The artifacts list names the variant's download (its file, or its zip) and gives its URL.
async function variantCard(jobId, variant) {
  const url = `/v1/models/${encodeURIComponent(variant.model_id)}/variants/${encodeURIComponent(variant.id)}/file`;
  let name = Object.keys(variant.files ?? {}).length === 1 ? Object.keys(variant.files)[0] : `${variant.id}.zip`;
  try {
    const { artifacts } = await getJson(`/v1/jobs/${jobId}/artifacts`);
    name = artifacts.find((a) => a.url === url)?.name ?? name;
  } catch { /* the name from the variant's files */ }
  const link = h('a', {
    href: ROOT + url,
    class: 'download',
    id: `variant-download-${variant.id}`,
    download: name,
    onclick: (event) => {
      event.preventDefault(); // the token goes in a header: fetched, then saved
      download(url, name);
    },
  }, `Download ${name}`);
  const lineage = variant.lineage ?? {};
  const built = ['imgsz', 'batch', 'half', 'int8', 'dynamic']
    .filter((k) => lineage[k] !== undefined).map((k) => `${k} ${lineage[k]}`).join(', ');
  const host = ['device', 'gpu_name', 'compute_capability', 'tensorrt_version', 'ultralytics_version']
    .filter((k) => lineage[k]).map((k) => `${k} ${lineage[k]}`).join(', ');
  const files = Object.entries(variant.files ?? {});
  return h('div', { class: 'variant', 'data-variant': variant.id },
    definitionList([
      ['format', variant.format],
      ['variant', h('span', { class: 'mono' }, variant.id)],
      ['model', h('a', { href: `#/models/${encodeURIComponent(variant.model_id)}` }, variant.model_id)],
      ['size', fmtBytes(variant.size_bytes)],
      ['sha256', h('span', { class: 'mono' }, variant.sha256)],
      ['checks', checks(variant)],
      ['built with', built || '–'],
      ['built on', host || '–'],
      ['source', variant.source],
      ['download', link],
    ]),
    files.length ? h('div', { class: 'scroll' }, h('table', { class: 'variant-files' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'File'), h('th', { scope: 'col' }, 'sha256'))),
      h('tbody', {}, files.map(([file, digest]) => h('tr', {}, h('td', {}, file), h('td', { class: 'mono' }, digest)))))) : null);
}

// Whether jobs run it (its files still match their fingerprints, it has not failed too often),
// and the .pt it was made from.
function checks(variant) {
  const usable = variant.usable
    ? h('span', { class: 'check-ok' }, '✓ usable: its files match their sha256')
    : h('span', { class: 'check-bad' }, `✗ not usable: ${variant.unusable_reason ?? 'no reason given'}`);
  const source = variant.lineage?.source_sha256;
  return h('span', {}, usable, source ? h('span', { class: 'muted' }, ` · from the .pt ${source.slice(0, 12)}…`) : null);
}
