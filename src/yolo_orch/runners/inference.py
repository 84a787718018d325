"""Inference jobs on ultralytics YOLO models of every task, with loaded models kept warm per lane.

Thread model: the dispatcher runs each job in a worker thread and a lane runs at most `slots` jobs
at once; each job checks a model instance out of its lane's cache (`model_cache`) for the whole job.

CPU threads: `torch.set_num_threads` is partly per OS thread (OpenMP) and partly process-wide
(MKL), and importing ultralytics sets `OMP_NUM_THREADS=1`. So every job sets the thread count in
its own worker thread, and all jobs use one value per lane kind, so concurrent jobs never fight
over a process-wide setting: `cpu_threads` (default: all cores but one, see
`default_cpu_threads`) on the `cpu` lane, 1 on CUDA lanes, where the model runs on the GPU and
torch's CPU pool has almost nothing to do.

Batching: a job's images are decoded a chunk at a time (`decode`), and each chunk's images of one
shape go through one streaming `predict` (`predict`). Progress is reported and cancel checked after
every image; a stream left early is closed at once. Each image's entry is encoded by its task's
function (`encode`).

Formats: a job runs its model's `.pt` or one of its exported variants (`params.format`: `auto`
picks the fastest the lane can run, `variants.choose_variant`); the result's summary and the
job's log say which (`format`, `variant_id`).

Videos: a job with video inputs runs them, and its images, through `runners/video.py`.

Call `configure_ultralytics` before constructing the runner (offline, safe load).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from contextlib import closing
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from yolo_orch import images
from yolo_orch.domain import JobResult, JsonObject, Progress
from yolo_orch.errors import InvalidJob, InvalidJobInput, JobCancelled
from yolo_orch.jobfiles import INPUTS_DIR
from yolo_orch.params.inference import InferenceParams, check_task
from yolo_orch.runners.base import RunContext
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
from yolo_orch.runners.video import has_videos, run_media
from yolo_orch.variant_registry import ResolvedVariant
from yolo_orch.variants import ExportFormat, LaneRuntime, choose_variant, named_variant
from yolo_orch.weights import ResolvedWeights

if TYPE_CHECKING:
    from ultralytics.models import YOLO

    from yolo_orch.runners.decode import Decoded

__all__ = ["YoloInferenceRunner", "default_cpu_threads"]

log = logging.getLogger(__name__)

ResolveWeights = Callable[[str], ResolvedWeights]
ResolveVariants = Callable[[str], list[ResolvedVariant]]
"""A model id's usable variants, newest first."""


def no_variants(model_id: str) -> list[ResolvedVariant]:
    return []


class YoloInferenceRunner:
    """Runs inference jobs: `spec["files"]` (the images the server resolved at submission, each
    `{"path": <absolute path>, "name": <what the client called it>}`) through the job's model."""

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
    ) -> None:
        """`data_roots`: every input is read only if it is still inside them (or inside the
        job's own uploaded inputs) where it is opened. `lane_runtime` says what a lane can
        run (asked once per lane)."""
        self._resolve_weights = resolve_weights
        self._resolve_variants = resolve_variants
        self._lane_runtime = lane_runtime
        self._lane_runtimes: dict[str, LaneRuntime] = {}
        self._data_roots = list(data_roots)
        self._max_image_pixels = max_image_pixels
        self._cache = ModelCache(model_cache_size)
        self._cpu_threads = cpu_threads if cpu_threads is not None else default_cpu_threads()

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

    def run(self, ctx: RunContext) -> JobResult:
        import torch

        if len(ctx.devices) != 1:
            raise InvalidJobInput(f"an inference job runs on one device, not {ctx.devices!r}")
        device = ctx.devices[0]
        params = InferenceParams.from_job(ctx.job.params)
        sources = read_inputs(ctx.job.spec)
        model_ref = ctx.job.model_id or ctx.job.model
        weights = self._resolve_weights(model_ref)
        chosen = self._variant_for(model_ref, device, params)
        torch.set_num_threads(self._cpu_threads if device == "cpu" else 1)
        ctx.report_progress(Progress(0, len(sources), "images"))
        if chosen is None:
            key, load = weights.sha256, partial(load_model, device, weights, params)
            ran: JsonObject = {"format": "pt", "variant_id": None}
        else:
            if weights.task is None:
                raise RuntimeError(f"the task of model {model_ref!r} is unknown")
            key = chosen.variant.sha256
            load = partial(load_exported, device, chosen, weights.task, params)
            ran = {"format": str(chosen.variant.format), "variant_id": chosen.variant.id}
        log.info(
            "job %s runs %s on %s (params.format %s)",
            ctx.job.id,
            "the .pt" if chosen is None else f"{ran['format']} variant {ran['variant_id']}",
            device,
            params.format,
        )
        try:
            with self._cache.checkout(device, key, load) as model:
                # Submission checked the registry's task; the file's own says it again.
                task = str(model.task)
                check_task(ctx.job.params, task)
                # An exported model's metadata (kpt_names) is on its predictor's backend,
                # set up by the warm-up.
                predictor = model.predictor
                metadata = model.model if chosen is None or predictor is None else predictor.model
                encoding = Encoding.of(task, params, metadata)
                if has_videos(sources):
                    result = run_media(
                        ctx,
                        model,
                        device,
                        params,
                        encoding,
                        sources,
                        run_images=lambda images_ctx, images: self._run_images(
                            images_ctx, model, device, params, encoding, images
                        ),
                        roots=[*self._data_roots, ctx.workdir / INPUTS_DIR],
                        max_pixels=self._max_image_pixels,
                    )
                else:
                    result = self._run_images(ctx, model, device, params, encoding, sources)
                return JobResult(summary={**result.summary, **ran}, detail=result.detail)
        except torch.cuda.OutOfMemoryError as e:
            self._cache.flush(device)
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            raise RuntimeError(f"CUDA out of memory: {e}") from e

    def _variant_for(
        self, model_ref: str, device: str, params: InferenceParams
    ) -> ResolvedVariant | None:
        """The variant the job runs, or None for the `.pt`."""
        if params.format == "pt":
            return None
        resolved = self._resolve_variants(model_ref)
        if not resolved and params.format == "auto":
            return None
        by_id = {r.variant.id: r for r in resolved}
        variants = [r.variant for r in resolved]
        lane = self._lane_runtimes.get(device)
        if lane is None:
            lane = self._lane_runtimes[device] = self._lane_runtime(device)
        if params.format == "auto":
            picked = choose_variant(variants, lane, imgsz=params.imgsz, half=params.half)
        else:
            export_format = ExportFormat(params.format)
            picked = named_variant(
                variants, export_format, lane, imgsz=params.imgsz, half=params.half
            )
            if picked is None:  # retired or deleted since submission, or built for another GPU
                raise InvalidJob(
                    f"no usable {export_format} variant of the model fits imgsz "
                    f"{params.imgsz} on {device}",
                    code="format_not_available",
                )
        return None if picked is None else by_id[picked.id]

    def _run_images(
        self,
        ctx: RunContext,
        model: YOLO,
        device: str,
        params: InferenceParams,
        encoding: Encoding,
        sources: list[InputFile],
    ) -> JobResult:
        artifacts = ctx.workdir / "artifacts"
        total = len(sources)
        entries: list[JsonObject | None] = [None] * total
        done = 0

        def finished(index: int, entry: JsonObject) -> None:
            nonlocal done
            entries[index] = entry
            done += 1
            ctx.report_progress(Progress(done, total, "images"))

        def check_cancel() -> None:
            if done < total and ctx.should_cancel():
                raise JobCancelled(f"cancelled after {done} of {total} images")

        check_cancel()
        roots = [*self._data_roots, ctx.workdir / INPUTS_DIR]
        chunks = decoded_chunks(sources, batch_size(params.imgsz), roots, self._max_image_pixels)
        for chunk in chunks:
            decoded: list[Decoded] = []
            for index, image in chunk:
                if isinstance(image, str):
                    finished(index, {"source": sources[index].name, "error": image})
                    check_cancel()
                else:
                    decoded.append((index, image))
            for group in same_shape_groups(decoded):
                # closed at once if we stop early, not when the exception's traceback goes
                with closing(predict_batch(model, group, device, params)) as predictions:
                    for (index, image), result in predictions:
                        height, width = image.shape[:2]
                        output = ImageOutput(artifacts, index, sources[index].path.stem)
                        entry: JsonObject = {
                            "source": sources[index].name,
                            "width": int(width),
                            "height": int(height),
                            **encode(result, encoding, output),
                        }
                        if params.save_annotated:
                            entry["annotated"] = save_annotated(result, output)
                        finished(index, entry)
                        check_cancel()
        images = [entry for entry in entries if entry is not None]
        failed = sum(1 for image in images if "error" in image)
        return JobResult(
            summary={
                "task": encoding.task,
                "images": len(images),
                **counted(encoding.task, images),
                "failed_images": failed,
            },
            detail={"images": images},
        )


def default_cpu_threads() -> int:
    """torch threads for inference on the `cpu` lane: all cores but one. The spare core runs the
    event loop, HTTP and the store writer; with every core in torch's pool, each of the ~100 ops of
    a forward pass ends in a barrier that waits for whichever pool thread the OS has descheduled
    (bench.inference_overhead, 2 shared cores, 32-image jobs, server run time: 11-73 img/s, median
    19, with 2 threads; 28-56 with 1).
    """
    return max(1, (os.cpu_count() or 1) - 1)
