"""Inference jobs on ultralytics YOLO models of every task, with loaded models kept warm per lane.

Thread model: the dispatcher runs each job in a worker thread and a lane runs at most `slots` jobs
at once; each run (a job, or a batch of jobs sharing forward passes) checks a model instance out
of its lane's cache (`model_cache`) for the whole run.

CPU threads: `torch.set_num_threads` is partly per OS thread (OpenMP) and partly process-wide
(MKL), and importing ultralytics sets `OMP_NUM_THREADS=1`. So every job sets the thread count in
its own worker thread, and all jobs use one value per lane kind, so concurrent jobs never fight
over a process-wide setting: `cpu_threads` (default: all cores but one, see
`default_cpu_threads`) on the `cpu` lane, 1 on CUDA lanes, where the model runs on the GPU and
torch's CPU pool has almost nothing to do.

Batching: a job's images are decoded a chunk at a time (`decode`), and each chunk's images of one
shape go through one streaming `predict` (`predict`). Jobs the dispatcher batched (`batching`: one
model, one set of forward-pass params) put their images of one shape through the same passes, each
job keeping its own entries, progress, cancel and failure. Progress is reported and cancel checked
after every image; a stream left early is closed at once. Each image's entry is encoded by its
task's function (`encode`).

Formats: a job runs its model's `.pt` or one of its exported variants (`params.format`: `auto`
picks the fastest the lane can run, `variants.choose_variant`); the result's summary and the
job's log say which (`format`, `variant_id`).

Videos: a job with video inputs runs them, and its images, through `runners/video.py`.

Call `configure_ultralytics` before constructing the runner (offline, safe load).
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, closing, contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, cast

from yolo_orch.domain import JobResult, JsonObject, Progress
from yolo_orch.domain.variants import LaneRuntime, variant_for
from yolo_orch.errors import InvalidJobInput, JobCancelled
from yolo_orch.files import images
from yolo_orch.files.jobfiles import INPUTS_DIR
from yolo_orch.ops.logs import for_job
from yolo_orch.params.inference import ForwardPassParams, InferenceParams, check_task
from yolo_orch.params.slicing import DEFAULT_MAX_SLICES_PER_IMAGE
from yolo_orch.params.stream import shared_pass_key
from yolo_orch.registry.resolutions import ResolvedVariant
from yolo_orch.registry.weights import ResolvedWeights
from yolo_orch.runners import variant_runs
from yolo_orch.runners.artifact_names import input_stem
from yolo_orch.runners.base import BatchOutcome, BatchRecord, RunContext
from yolo_orch.runners.dataset_capture import CaptureWriter, JobCapture, job_capture
from yolo_orch.runners.decode import (
    InputFile,
    batch_size,
    decoded_chunks,
    read_inputs,
    same_shape_groups,
)
from yolo_orch.runners.encode import Encoding, ImageOutput, counted, encode, save_annotated
from yolo_orch.runners.formats import lane_runtime
from yolo_orch.runners.model_cache import ModelCache
from yolo_orch.runners.predict import load_exported, load_model, predict_batch
from yolo_orch.runners.slicing import sliced_predictions, too_many_slices
from yolo_orch.runners.stream_hub import StreamHub, StreamHubs
from yolo_orch.runners.video import has_videos, run_media

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
    from ultralytics.engine.results import Results
    from ultralytics.models import YOLO

    from yolo_orch.runners.decode import Decoded

    Pixels = NDArray[np.uint8]

__all__ = ["YoloInferenceRunner", "default_cpu_threads"]

log = logging.getLogger(__name__)

ResolveWeights = Callable[[str], ResolvedWeights]
ResolveVariants = Callable[[str], list[ResolvedVariant]]
"""A model id's usable variants, newest first."""


def no_variants(model_id: str) -> list[ResolvedVariant]:
    return []


class YoloInferenceRunner:
    """Runs inference jobs: `spec.files` (the images the server resolved at submission, each
    with its absolute path and what the client called it) through the job's model."""

    def __init__(
        self,
        resolve_weights: ResolveWeights,
        model_cache_size: int = 2,
        cpu_threads: int | None = None,
        max_image_pixels: int = images.DEFAULT_MAX_IMAGE_PIXELS,
        *,
        data_roots: Sequence[Path],
        resolve_variants: ResolveVariants = no_variants,
        lane_runtime: Callable[[str], LaneRuntime] = lane_runtime,
        decoded_ahead: Callable[[Path], Pixels | str | None] = lambda path: None,
        stream_hubs: StreamHubs | None = None,
        capture: CaptureWriter | None = None,
        max_slices_per_image: int = DEFAULT_MAX_SLICES_PER_IMAGE,
    ) -> None:
        """`data_roots`: every input is read only if it is still inside them (or inside the
        job's own uploaded inputs) where it is opened. `lane_runtime` says what a lane can
        run (asked once per lane). `decoded_ahead`: an input's pixels decoded before its job
        ran (`DecodeAhead.take`), None when the runner decodes it."""
        self._resolve_weights = resolve_weights
        self._resolve_variants = resolve_variants
        self._lane_runtime = lane_runtime
        self._lane_runtimes: dict[str, LaneRuntime] = {}
        self._data_roots = list(data_roots)
        self._max_image_pixels = max_image_pixels
        self._max_slices = max_slices_per_image
        self._decoded_ahead = decoded_ahead
        self._stream_hubs = stream_hubs
        """Where the lanes' streams run: a job of their model and params joins their passes."""
        self._capture = capture
        self._cache = ModelCache(model_cache_size)
        self._cpu_threads = cpu_threads if cpu_threads is not None else default_cpu_threads()
        self._batch_lock = threading.Lock()
        self._batches: deque[BatchRecord] = deque(maxlen=1000)

    @property
    def cache_hits(self) -> int:
        """Jobs that found their model loaded and idle on their lane."""
        return self._cache.hits

    @property
    def loads(self) -> int:
        """How many model instances were loaded since start (a cache-miss counter)."""
        return self._cache.loads

    def cached_models(self, device: str) -> list[str]:
        """sha256s of the models loaded on `device`: idle ones, least recently used first, then
        the ones only in use."""
        return self._cache.models(device)

    @property
    def batches(self) -> list[BatchRecord]:
        """The forward passes shared by more than one job, oldest first (the last 1000)."""
        with self._batch_lock:
            return list(self._batches)

    def run(self, ctx: RunContext) -> JobResult:
        outcome = self.run_batch([ctx])[0]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def run_batch(self, ctxs: Sequence[RunContext]) -> list[BatchOutcome]:
        """Jobs of one model and forward-pass params (`forward_pass_key`) on one lane: each job's
        images of one shape share forward passes with the other jobs' images of that shape."""
        import torch

        # Each job's own params and inputs are checked before any model is loaded.
        inputs = [_read_job(ctx) for ctx in ctxs]
        valid = [
            (ctx, read)
            for ctx, read in zip(ctxs, inputs, strict=True)
            if not isinstance(read, Exception)
        ]
        if not valid:
            return [read for read in inputs if isinstance(read, Exception)]
        head, (params, _) = valid[0]
        if len(head.devices) != 1:
            raise InvalidJobInput(f"an inference job runs on one device, not {head.devices!r}")
        device = head.devices[0]
        chosen, key, load, ran = self._loader(device, head.job.model_id or head.job.model, params)
        torch.set_num_threads(self._cpu_threads if device == "cpu" else 1)
        for ctx in ctxs:
            log.info(
                "job %s runs %s on %s (params.format %s, %d job(s) in its batch)",
                ctx.job.id,
                "the .pt" if chosen is None else f"{ran['format']} variant {ran['variant_id']}",
                device,
                params.format,
                len(ctxs),
                extra=for_job(ctx.job.id),  # each job's own log, not its batch's first
            )
        try:
            with self._cache.checkout(device, key, load) as model:
                # An exported model's metadata (kpt_names) is on its predictor's backend,
                # set up by the warm-up.
                predictor = model.predictor
                metadata = model.model if chosen is None or predictor is None else predictor.model
                jobs: list[_JobImages | JobResult | Exception] = []
                for ctx, read in zip(ctxs, inputs, strict=True):
                    if isinstance(read, Exception):
                        jobs.append(read)
                        continue
                    job_params, sources = read
                    try:
                        # Submission checked the registry's task; the file's own says it again.
                        check_task(ctx.job.params, str(model.task))
                        encoding = Encoding.of(str(model.task), job_params, metadata)
                        capture = job_capture(self._capture, ctx.job, job_params.capture)
                    except Exception as exc:  # this job's own: the others go on
                        jobs.append(exc)
                        continue
                    if has_videos(sources):  # alone: `batch_key` never batches a video job
                        jobs.append(
                            self._run_media(ctx, model, device, job_params, encoding, sources, ran)
                        )
                        continue
                    ctx.report_progress(Progress(0, len(sources), "images"))
                    jobs.append(_JobImages(ctx, job_params, encoding, sources, capture))
                runnable = [job for job in jobs if isinstance(job, _JobImages)]
                self._run_passes(model, device, params, runnable)
                return [job.outcome(ran) if isinstance(job, _JobImages) else job for job in jobs]
        except torch.cuda.OutOfMemoryError as e:
            self._cache.flush(device)
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            raise RuntimeError(f"CUDA out of memory: {e}") from e

    def _loader(
        self, device: str, model_ref: str, params: ForwardPassParams
    ) -> tuple[ResolvedVariant | None, str, Callable[[], YOLO], JsonObject]:
        """What runs `model_ref` on `device` for `params` (the variant, or None for the .pt),
        its cache key, how to load it, and what the result says ran. In a worker thread of
        the server's (the registry is asked on its loop)."""
        weights = self._resolve_weights(model_ref)
        chosen = self._variant_for(model_ref, device, params)
        variant_runs.note(None if chosen is None else chosen.variant.id)  # a failure names it
        if chosen is None:
            load = partial(load_model, device, weights, params)
            return None, weights.sha256, load, {"format": "pt", "variant_id": None}
        if weights.task is None:
            raise RuntimeError(f"the task of model {model_ref!r} is unknown")
        load = partial(load_exported, device, chosen, weights.task, params)
        ran = {"format": str(chosen.variant.format), "variant_id": chosen.variant.id}
        return chosen, chosen.variant.sha256, load, ran

    def checkout(
        self, device: str, model_ref: str, params: ForwardPassParams
    ) -> Callable[[], AbstractContextManager[YOLO]]:
        """The model (or variant) a job of `model_ref` with `params` runs on `device`: resolved
        now, in the server's worker thread; taken from the lane's cache, for the caller alone
        until it is done with it, by whichever thread enters it (a stream's hub)."""
        _, key, load, _ = self._loader(device, model_ref, params)
        return partial(self._checkout, device, key, load)

    @contextmanager
    def _checkout(self, device: str, key: str, load: Callable[[], YOLO]) -> Iterator[YOLO]:
        import torch

        torch.set_num_threads(self._cpu_threads if device == "cpu" else 1)
        with self._cache.checkout(device, key, load) as model:
            yield model

    def _run_media(
        self,
        ctx: RunContext,
        model: YOLO,
        device: str,
        params: InferenceParams,
        encoding: Encoding,
        sources: list[InputFile],
        ran: JsonObject,
    ) -> BatchOutcome:
        """A job with videos: its images through the same passes as a batch's, then each video
        frame by frame (`run_media`); an OOM is the whole pass's, as in `run_batch`."""
        import torch

        def run_images(images_ctx: RunContext, images: list[InputFile]) -> JobResult:
            job = _JobImages(images_ctx, params, encoding, images)
            self._run_passes(model, device, params, [job])
            outcome = job.outcome({})
            if isinstance(outcome, Exception):
                raise outcome
            return outcome

        try:
            result = run_media(
                ctx,
                model,
                device,
                params,
                encoding,
                sources,
                run_images=run_images,
                roots=[*self._data_roots, ctx.workdir / INPUTS_DIR],
                max_pixels=self._max_image_pixels,
            )
        except torch.cuda.OutOfMemoryError:
            raise
        except Exception as exc:  # this job's own: its batch companions go on
            return exc
        return JobResult(summary={**result.summary, **ran}, detail=result.detail)

    def _variant_for(
        self, model_ref: str, device: str, params: ForwardPassParams
    ) -> ResolvedVariant | None:
        """The variant the job runs, or None for the `.pt` (`variants.variant_for`)."""
        if params.format == "pt":
            return None
        resolved = self._resolve_variants(model_ref)
        if not resolved and params.format == "auto":
            return None
        lane = self._lane_runtimes.get(device)
        if lane is None:
            lane = self._lane_runtimes[device] = self._lane_runtime(device)
        variants = [r.variant for r in resolved]
        picked = variant_for(variants, params.format, lane, imgsz=params.imgsz, half=params.half)
        return None if picked is None else next(r for r in resolved if r.variant is picked)

    def _run_passes(
        self, model: YOLO, device: str, params: InferenceParams, jobs: list[_JobImages]
    ) -> None:
        """Decode the jobs' images a chunk at a time; each chunk's images of one shape (from any
        of the jobs) go through one forward pass. Each job is checked for cancel between
        images, and stops alone."""
        if params.slice is not None:
            self._run_sliced(model, device, params, jobs)
            return
        size = batch_size(params.imgsz)
        hubs, hub = self._stream_hubs, None
        if hubs is not None and jobs:
            hub = hubs.find(device, shared_pass_key(jobs[0].ctx.job))
        pending = [(job, self._chunks(job, size)) for job in jobs]
        while pending:
            decoded: list[tuple[_JobImages, Decoded]] = []
            for job, chunks in list(pending):  # a chunk of each job until the pass is full
                if len(decoded) >= size:
                    break
                chunk = next(chunks, None)
                if chunk is None:
                    pending.remove((job, chunks))
                    continue
                for index, image in chunk:
                    if isinstance(image, str):
                        job.finished(index, {"source": job.sources[index].name, "error": image})
                    elif not job.stopped():
                        decoded.append((job, (index, image)))
            for group in same_shape_groups(decoded):
                live = [(job, item) for job, item in group if not job.stopped()]
                if not live:
                    continue
                self._note_pass(live)
                # closed at once if we stop early, not when the exception's traceback goes
                items = [item for _, item in live]
                if hub is not None and self._with_streams(hub, live):
                    continue
                with closing(predict_batch(model, items, device, params)) as predictions:
                    for (job, _), ((index, image), result) in zip(live, predictions, strict=True):
                        job.add(index, image, result)
                        if all(job.stopped() for job, _ in live):
                            break

    def _run_sliced(
        self, model: YOLO, device: str, params: InferenceParams, jobs: list[_JobImages]
    ) -> None:
        """`params.slice`: a chunk of each job's images at a time, as `_run_passes` takes them;
        the tiles of all those images share forward passes (`slicing.sliced_predictions`)."""
        assert params.slice is not None
        size = batch_size(params.imgsz)
        pending = [(job, self._chunks(job, size)) for job in jobs]
        while pending:
            ready: list[tuple[_JobImages, Decoded]] = []
            for job, chunks in list(pending):  # a chunk of each job until the pass is full
                if len(ready) >= size:
                    break
                chunk = next(chunks, None)
                if chunk is None:
                    pending.remove((job, chunks))
                    continue
                for index, image in chunk:
                    refused = image if isinstance(image, str) else None
                    if not isinstance(image, str):
                        refused = too_many_slices(image, params.slice, self._max_slices)
                        if refused is None and not job.stopped():
                            ready.append((job, (index, image)))
                    if refused is not None:
                        job.finished(index, {"source": job.sources[index].name, "error": refused})
            if not ready:
                continue
            self._note_pass(ready)
            images = [(n, image) for n, (_, (_, image)) in enumerate(ready)]
            found = sliced_predictions(model, device, params, images, partial(_all_stopped, ready))
            with closing(found) as merged:
                for n, pixels, result in merged:
                    job, (index, _) = ready[n]
                    if not job.stopped():
                        job.add(index, pixels, result)

    @staticmethod
    def _with_streams(hub: StreamHub, live: list[tuple[_JobImages, Decoded]]) -> bool:
        """Run the images through the passes of the lane's streams of this model and params;
        False when those streams have ended meanwhile."""
        results = hub.infer([(job.ctx.job.id, image) for job, (_, image) in live])
        if results is None:
            return False
        for (job, (index, image)), result in zip(live, results, strict=True):
            if not job.stopped():
                job.add(index, image, cast("Results", result))
        return True

    def _chunks(self, job: _JobImages, size: int) -> Iterator[list[tuple[int, Pixels | str]]]:
        roots = [*self._data_roots, job.ctx.workdir / INPUTS_DIR]
        return decoded_chunks(job.sources, size, roots, self._max_image_pixels, self._decoded_ahead)

    def _note_pass(self, live: list[tuple[_JobImages, Decoded]]) -> None:
        ids = tuple(dict.fromkeys(job.ctx.job.id for job, _ in live))
        if len(ids) > 1:
            with self._batch_lock:
                self._batches.append(BatchRecord(ids, len(live)))


_JobInputs = tuple[InferenceParams, list[InputFile]]


def _all_stopped(images: list[tuple[_JobImages, Decoded]]) -> bool:
    return all(job.stopped() for job, _ in images)


def _read_job(ctx: RunContext) -> _JobInputs | Exception:
    """A job's params and images, or why they are unusable."""
    try:
        return InferenceParams.from_job(ctx.job.params), read_inputs(ctx.job)
    except Exception as exc:
        return exc


class _JobImages:
    """One job of a batch: its images' entries as they come, its progress and its cancel."""

    def __init__(
        self,
        ctx: RunContext,
        params: InferenceParams,
        encoding: Encoding,
        sources: list[InputFile],
        capture: JobCapture | None = None,
    ) -> None:
        self.ctx = ctx
        self.params = params
        self.encoding = encoding
        self.sources = sources
        self.entries: list[JsonObject | None] = [None] * len(sources)
        self.done = 0
        self.cancelled: JobCancelled | None = None
        self.capture = capture

    def stopped(self) -> bool:
        if self.cancelled is None and self.done < len(self.sources) and self.ctx.should_cancel():
            self.cancelled = JobCancelled(
                f"cancelled after {self.done} of {len(self.sources)} images"
            )
        return self.cancelled is not None

    def finished(self, index: int, entry: JsonObject) -> None:
        self.entries[index] = entry
        self.done += 1
        self.ctx.report_progress(Progress(self.done, len(self.sources), "images"))

    def add(self, index: int, image: Pixels, result: Results) -> None:
        height, width = image.shape[:2]
        stem = input_stem(self.sources[index].name)
        output = ImageOutput(self.ctx.workdir / "artifacts", index, stem)
        entry: JsonObject = {
            "source": self.sources[index].name,
            "width": int(width),
            "height": int(height),
            **encode(result, self.encoding, output),
        }
        if self.params.save_annotated:
            entry["annotated"] = save_annotated(result, output)
        if self.capture is not None:
            self.capture.offer(entry, image, index + 1)
        self.finished(index, entry)

    def outcome(self, ran: JsonObject) -> BatchOutcome:
        if self.stopped():
            assert self.cancelled is not None
            return self.cancelled
        images = [entry for entry in self.entries if entry is not None]
        failed = sum(1 for image in images if "error" in image)
        summary: JsonObject = {
            "task": self.encoding.task,
            "images": len(images),
            **counted(self.encoding.task, images),
            "failed_images": failed,
            **ran,
        }
        if self.capture is not None:
            summary["capture"] = self.capture.summary()
        return JobResult(summary=summary, detail={"images": images})


def default_cpu_threads() -> int:
    """torch threads for inference on the `cpu` lane: all cores but one. The spare core runs the
    event loop, HTTP and the store writer; with every core in torch's pool, each of the ~100 ops of
    a forward pass ends in a barrier that waits for whichever pool thread the OS has descheduled
    (bench.inference_overhead, 2 shared cores, 32-image jobs, server run time: 11-73 img/s, median
    19, with 2 threads; 28-56 with 1).
    """
    return max(1, (os.cpu_count() or 1) - 1)
