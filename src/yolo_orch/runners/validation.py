"""Validation jobs: ultralytics' validator for the model's task, on one lane, in the job's worker
thread: progress after each batch, cancel between batches (`JobCancelled` raised from the batch
callback), the task's metrics read from what ultralytics computed (`runners.task_metrics`), and
its plots (confusion matrix, PR and other curves) kept as artifacts with the per-class table.

The same choices as training (`runners.training`): one device for ultralytics, no DataLoader
worker processes (a fork of this multi-threaded process could hang), no AMP. Plots are drawn
with the font `configure_ultralytics` installed (ultralytics would download Arial).
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from yolo_orch.domain import JobResult, JsonObject, Progress
from yolo_orch.domain.specs import ValidationSpec
from yolo_orch.errors import InvalidJobInput, JobCancelled
from yolo_orch.files.jobfiles import write_atomic
from yolo_orch.params.validation import ValidationParams
from yolo_orch.runners import task_metrics
from yolo_orch.runners.base import RunContext
from yolo_orch.runners.inference import default_cpu_threads
from yolo_orch.runners.sources import ResolveWeights, job_dataset, registry_weights
from yolo_orch.runners.trainers import ultralytics_device

__all__ = ["YoloValidationRunner"]

PER_CLASS_CSV = "per_class.csv"


class YoloValidationRunner:
    """Runs validation jobs: a registry model on `spec.dataset_path`, split `spec.split`."""

    def __init__(
        self,
        resolve_weights: ResolveWeights,
        *,
        data_roots: Sequence[Path],
        cpu_threads: int | None = None,
    ) -> None:
        self._resolve_weights = resolve_weights
        self._data_roots = tuple(data_roots)
        self._cpu_threads = cpu_threads if cpu_threads is not None else default_cpu_threads()

    def run(self, ctx: RunContext) -> JobResult:
        import torch

        params = ValidationParams.from_job(ctx.job.params)
        split = ctx.job.spec_as(ValidationSpec).split
        ctx.workdir.mkdir(parents=True, exist_ok=True)
        path, task = registry_weights(self._resolve_weights, ctx)
        data, splits = job_dataset(ctx, task, self._data_roots)
        if split not in splits:
            raise InvalidJobInput(f"the dataset has no {split!r} split")
        save_dir = ctx.workdir / "val"
        shutil.rmtree(save_dir, ignore_errors=True)  # a rerun after a crash starts clean
        args = {
            "task": task,
            "mode": "val",
            "model": str(path),
            "data": data,
            "split": split,
            "imgsz": params.imgsz,
            "batch": params.batch,
            "conf": params.conf,
            "iou": params.iou,
            "device": ultralytics_device(ctx.devices),
            "workers": 0,
            "plots": True,
            "half": False,
            "verbose": False,
        }
        validator = _validators()[task](save_dir=save_dir, args=args)
        batches = _Batches(ctx)
        validator.add_callback("on_val_start", batches.on_val_start)
        validator.add_callback("on_val_batch_end", batches.on_val_batch_end)
        torch.set_num_threads(self._cpu_threads if ctx.devices[0] == "cpu" else 1)
        try:
            stats: dict[str, Any] = validator(model=str(path)) or {}
        except torch.cuda.OutOfMemoryError as e:
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            raise RuntimeError(f"CUDA out of memory: {e}") from e
        return _result(ctx, task, split, stats, validator, save_dir)


class _Batches:
    def __init__(self, ctx: RunContext) -> None:
        self._ctx = ctx
        self._done = 0
        self._total = 0

    def on_val_start(self, validator: Any) -> None:
        self._total = len(validator.dataloader)
        self._ctx.report_progress(Progress(0, self._total, "batches"))

    def on_val_batch_end(self, _validator: Any) -> None:
        self._done += 1
        self._ctx.report_progress(Progress(self._done, self._total, "batches"))
        if self._ctx.should_cancel():
            raise JobCancelled(f"cancelled after {self._done} of {self._total} batches")


def _result(
    ctx: RunContext, task: str, split: str, stats: dict[str, Any], validator: Any, save_dir: Path
) -> JobResult:
    metrics = task_metrics.scores(stats)
    rows = task_metrics.per_class(validator.metrics)
    artifacts = ctx.workdir / "artifacts"
    artifacts.mkdir(exist_ok=True)
    names = []
    if rows:
        write_atomic(artifacts / PER_CLASS_CSV, task_metrics.per_class_csv(rows))
        names.append(PER_CLASS_CSV)
    for plot in sorted(save_dir.glob("*.png")):
        tmp = artifacts / f".{plot.name}.tmp"
        shutil.copyfile(plot, tmp)
        os.replace(tmp, artifacts / plot.name)
        names.append(plot.name)
    images = len(validator.dataloader.dataset)
    detail: JsonObject = {
        "task": task,
        "split": split,
        "images": images,
        "metrics": metrics,
        "per_class": rows,
        "confusion_matrix": task_metrics.confusion_matrix(validator),
        "curves": task_metrics.curves(validator.metrics),
        "speed_ms_per_image": task_metrics.speed(validator),
        "artifacts": names,
    }
    summary = {"task": task, "split": split, "images": images, "metrics": metrics}
    return JobResult(summary=summary, detail=detail)


@functools.cache
def _validators() -> dict[str, type[Any]]:
    """ultralytics' validator per task, imported on first use (after it is configured)."""
    from ultralytics.models.yolo.classify import ClassificationValidator
    from ultralytics.models.yolo.depth import DepthValidator
    from ultralytics.models.yolo.detect import DetectionValidator
    from ultralytics.models.yolo.obb import OBBValidator
    from ultralytics.models.yolo.pose import PoseValidator
    from ultralytics.models.yolo.segment import SegmentationValidator
    from ultralytics.models.yolo.semantic import SemanticSegmentationValidator

    return {
        "detect": DetectionValidator,
        "segment": SegmentationValidator,
        "pose": PoseValidator,
        "obb": OBBValidator,
        "classify": ClassificationValidator,
        "semantic": SemanticSegmentationValidator,
        "depth": DepthValidator,
    }
