"""The simulated runtime: deterministic fake jobs on `sim:N` lanes, for tests and demos without a
GPU. Every failure path of the real runners can be asked for with `params.sim_fail`."""

from __future__ import annotations

import json
import os
import random
import time

from yolo_orch.domain import SIM_MODEL, JobKind, JobResult, JsonObject, Progress
from yolo_orch.errors import JobCancelled
from yolo_orch.jobfiles import METRICS_FILE, write_atomic
from yolo_orch.runners.base import RunContext, Runner

CRASH_EXIT_CODE = 70
RUN_LOG = "sim-runs.log"
"""Each finished run appends `attempt N succeeded` here, so tests can count real executions."""

_CLASS_NAMES = ("person", "bicycle", "car", "dog")


class SimulatedRuntime:
    name = "simulated"

    def __init__(self, lane_count: int) -> None:
        self._lanes = [f"sim:{i}" for i in range(lane_count)]
        self._runner = SimulatedRunner()

    def lanes(self) -> list[str]:
        return list(self._lanes)

    def runner(self, kind: JobKind) -> Runner:
        return self._runner

    def provides(self, model: str, kind: JobKind) -> bool:
        return model == SIM_MODEL

    def model_task(self, model: str) -> str | None:
        return None

    def cached_models(self, lane: str) -> list[str]:
        return []

    def cache_stats(self) -> tuple[int, int]:
        return 0, 0


class SimulatedRunner:
    def run(self, ctx: RunContext) -> JobResult:
        params = ctx.job.params
        seconds = float(params.get("sim_seconds", 0.2))
        steps = int(params.get("sim_steps", 5))
        failure = params.get("sim_fail")
        if failure == "crash":
            os._exit(CRASH_EXIT_CODE)
        for step in range(1, steps + 1):
            if ctx.should_cancel():
                raise JobCancelled()
            time.sleep(seconds / steps)
            if ctx.job.kind is JobKind.TRAINING:  # a step is an epoch: its metrics, as training's
                write_atomic(
                    ctx.workdir / METRICS_FILE, json.dumps(_history(steps)[:step]).encode()
                )
            ctx.report_progress(Progress(step, steps, "steps"))
            if step * 2 >= steps:
                if failure == "error":
                    raise RuntimeError("simulated failure")
                if failure == "oom":
                    raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (simulated)")
                if failure == "cuda_fatal":
                    raise RuntimeError(
                        "CUDA error: an illegal memory access was encountered (simulated)"
                    )
        ctx.workdir.mkdir(parents=True, exist_ok=True)
        with (ctx.workdir / RUN_LOG).open("a") as log:
            log.write(f"attempt {ctx.job.attempt} succeeded\n")
        if ctx.job.kind is JobKind.TRAINING:
            return _training_result(ctx.job.id, steps)
        if ctx.job.kind is JobKind.VALIDATION:
            return _validation_result(ctx.job.id, ctx.job.spec.get("split", "val"))
        if ctx.job.kind is JobKind.EXPORT:
            return _export_result(str(params["format"]))
        ran = params.get("format", "auto")
        return _inference_result(list(ctx.job.spec.get("inputs", [])), str(ran))


def _inference_result(inputs: list[str], ran: str) -> JobResult:
    """`ran`: the job's format, as if it had that variant (`auto` runs the `.pt`)."""
    images = [_fake_detections(name) for name in inputs]
    total = sum(len(image["detections"]) for image in images)
    summary: JsonObject = {
        "images": len(images),
        "detections": total,
        "failed_images": 0,
        "format": "pt" if ran == "auto" else ran,
        "variant_id": None,
    }
    return JobResult(summary=summary, detail={"images": images})


def _fake_detections(source: str) -> JsonObject:
    rng = random.Random(source)
    width, height = 640, 480
    detections = []
    for _ in range(rng.randint(0, 3)):
        class_id = rng.randrange(len(_CLASS_NAMES))
        x1, y1 = rng.uniform(0, width / 2), rng.uniform(0, height / 2)
        detections.append(
            {
                "class_id": class_id,
                "class_name": _CLASS_NAMES[class_id],
                "confidence": round(rng.uniform(0.3, 0.99), 4),
                "box": {
                    "x1": round(x1, 1),
                    "y1": round(y1, 1),
                    "x2": round(x1 + rng.uniform(10, width / 2), 1),
                    "y2": round(y1 + rng.uniform(10, height / 2), 1),
                },
            }
        )
    return {"source": source, "width": width, "height": height, "detections": detections}


def _training_result(job_id: str, epochs: int) -> JobResult:
    metrics = _fake_metrics(job_id)
    return JobResult(
        summary={"epochs": epochs, "metrics": metrics, "model_id": None},
        detail={
            "model": None,
            "epochs": epochs,
            "metrics": metrics,
            "history": _history(epochs),
            "artifacts": [],
        },
    )


def _history(epochs: int) -> list[JsonObject]:
    """Falling losses and rising scores, one entry per epoch, in the shape real training writes."""
    return [
        {
            "epoch": epoch,
            "train_loss": _losses(3.0 / (1 + 0.5 * epoch)),
            "val_loss": _losses(3.2 / (1 + 0.4 * epoch)),
            "precision": round(0.9 - 0.6 / epoch, 4),
            "recall": round(0.85 - 0.6 / epoch, 4),
            "mAP50": round(0.8 - 0.6 / epoch, 4),
            "mAP50-95": round(0.55 - 0.45 / epoch, 4),
        }
        for epoch in range(1, epochs + 1)
    ]


def _losses(total: float) -> JsonObject:
    return {
        "box_loss": round(total * 0.4, 5),
        "cls_loss": round(total * 0.35, 5),
        "dfl_loss": round(total * 0.25, 5),
    }


def _validation_result(job_id: str, split: str) -> JobResult:
    metrics = _fake_metrics(job_id)
    summary = {"task": "detect", "split": split, "images": 4, "metrics": metrics}
    detail = {
        **summary,
        "per_class": [],
        "confusion_matrix": None,
        "speed_ms_per_image": {"preprocess": 0.0, "inference": 0.0, "postprocess": 0.0},
        "artifacts": [],
    }
    return JobResult(summary=summary, detail=detail)


def _fake_metrics(job_id: str) -> JsonObject:
    rng = random.Random(job_id)
    return {
        "precision": round(rng.uniform(0.5, 0.9), 4),
        "recall": round(rng.uniform(0.5, 0.9), 4),
        "mAP50": round(rng.uniform(0.4, 0.8), 4),
        "mAP50-95": round(rng.uniform(0.2, 0.6), 4),
    }


def _export_result(export_format: str) -> JobResult:
    summary = {"model_id": None, "variant_id": None, "format": export_format}
    return JobResult(summary=summary, detail={**summary, "variant": None})
