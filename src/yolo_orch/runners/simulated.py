"""The simulated runtime: deterministic fake jobs on `sim:N` lanes, for tests and demos without a
GPU. Every failure path of the real runners can be asked for with `params.sim_fail`."""

from __future__ import annotations

import io
import json
import math
import os
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from yolo_orch.domain import SIM_MODEL, JobKind, JobResult, JsonObject, Progress
from yolo_orch.domain.specs import InferenceSpec, ValidationSpec
from yolo_orch.errors import JobCancelled
from yolo_orch.files.jobfiles import METRICS_FILE, open_to_append, write_atomic
from yolo_orch.params.capture import CaptureParams
from yolo_orch.params.stream import StreamParams
from yolo_orch.runners.base import BatchOutcome, BatchRecord, RunContext, Runner
from yolo_orch.runners.dataset_capture import CaptureWriter, job_capture
from yolo_orch.runners.stream import StreamOutputs, StreamRunner
from yolo_orch.runners.stream_hub import LoadModel, StreamModel
from yolo_orch.runners.stream_sim import SIM_PASS_S, SimStreamModel

CRASH_EXIT_CODE = 70
RUN_LOG = "sim-runs.log"
"""Each finished run appends `attempt N succeeded` here, so tests can count real executions."""
BATCH_LOG = "sim-batches.log"
"""Each forward pass a job took part in appends `attempt N ran|oom: <job ids of the pass>` here,
so tests of a server in another process can see which jobs shared a pass."""

_CLASS_NAMES = ("person", "bicycle", "car", "dog")


class SimulatedRuntime:
    name = "simulated"

    def __init__(
        self,
        lane_count: int,
        streams: StreamOutputs | None = None,
        capture: CaptureWriter | None = None,
    ) -> None:
        """`streams`: what stream jobs publish to (the server's; a runtime of its own else).
        `capture`: where the images `params.capture` selects are written."""
        self._lanes = [f"sim:{i}" for i in range(lane_count)]
        self._runner = SimulatedRunner(capture)
        self.streams = StreamRunner(
            _sim_stream_model, streams or StreamOutputs(), dataset_capture=capture
        )

    def lanes(self) -> list[str]:
        return list(self._lanes)

    def runner(self, kind: JobKind) -> Runner:
        return self.streams if kind is JobKind.STREAM else self._runner

    def provides(self, model: str, kind: JobKind) -> bool:
        return model == SIM_MODEL

    def model_task(self, model: str) -> str | None:
        return None

    def cached_models(self, lane: str) -> list[str]:
        return []

    def cache_stats(self) -> tuple[int, int]:
        return 0, 0

    def uploaded(self, paths: Sequence[Path]) -> None:
        pass

    def decoded_ahead(self) -> int:
        return 0

    @property
    def batches(self) -> list[BatchRecord]:
        """The forward passes shared by more than one job (see `SimulatedRunner.batches`)."""
        return self._runner.batches


def _sim_stream_model(device: str, ctx: RunContext, params: StreamParams) -> LoadModel:
    pass_s = params.sim_seconds if params.sim_seconds is not None else SIM_PASS_S
    model: StreamModel = SimStreamModel(pass_s)
    return lambda: nullcontext(model)


class SimulatedRunner:
    """Runs one job, or a batch of jobs as one forward pass: the pass takes as long as its
    slowest job, and each job fails, or is cancelled, on its own (`sim_fail`), except that
    `sim_fail: oom`, a pass of more than `sim_oom_above` images, `cuda_fatal` and `crash`
    fail the whole pass, as they would on a GPU."""

    def __init__(self, capture: CaptureWriter | None = None) -> None:
        self._lock = threading.Lock()
        self._batches: deque[BatchRecord] = deque(maxlen=1000)
        self._capture = capture

    @property
    def batches(self) -> list[BatchRecord]:
        """The forward passes of more than one job, oldest first (the last 1000)."""
        with self._lock:
            return list(self._batches)

    def run(self, ctx: RunContext) -> JobResult:
        outcome = self._run_pass([ctx])[0]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def run_batch(self, ctxs: Sequence[RunContext]) -> list[BatchOutcome]:
        return self._run_pass(ctxs)

    def _run_pass(self, ctxs: Sequence[RunContext]) -> list[BatchOutcome]:
        params = [ctx.job.params for ctx in ctxs]
        failures = {p.get("sim_fail") for p in params}
        if "crash" in failures:
            os._exit(CRASH_EXIT_CODE)
        images = sum(len(_inputs(ctx)) or 1 for ctx in ctxs)
        limits = [int(p["sim_oom_above"]) for p in params if p.get("sim_oom_above") is not None]
        seconds = max(float(p.get("sim_seconds", 0.2)) for p in params)
        steps = [int(p.get("sim_steps", 5)) for p in params]
        outcomes: list[BatchOutcome | None] = [None] * len(ctxs)
        began = time.monotonic()
        for step in range(1, max(steps) + 1):
            for index, ctx in enumerate(ctxs):
                if outcomes[index] is None and step <= steps[index] and ctx.should_cancel():
                    outcomes[index] = JobCancelled()
            if all(outcome is not None for outcome in outcomes):
                break  # every job of the pass stopped at this safe point: no step more
            # Each step ends on its share of the pass's time, however late the thread woke from
            # the last one (waiting for the GIL): the device's work does not wait for Python.
            time.sleep(max(0.0, began + seconds * step / max(steps) - time.monotonic()))
            for index, ctx in enumerate(ctxs):
                if outcomes[index] is None and step <= steps[index]:
                    if SIMULATED_KINDS[ctx.job.kind].epochs:  # a step is one: its metrics
                        history = json.dumps(_history(step, ctx.job.params)).encode()
                        write_atomic(ctx.workdir / METRICS_FILE, history, durable=False)
                    ctx.report_progress(Progress(step, steps[index], "steps"))
            if step * 2 >= max(steps):
                if "oom" in failures or (limits and images > min(limits)):
                    self._note(ctxs, images, ran=False)
                    raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB (simulated)")
                if "cuda_fatal" in failures:
                    raise RuntimeError(
                        "CUDA error: an illegal memory access was encountered (simulated)"
                    )
                for index, p in enumerate(params):
                    if outcomes[index] is None and p.get("sim_fail") == "error":
                        outcomes[index] = RuntimeError("simulated failure")
            if all(outcome is not None for outcome in outcomes):
                break
        self._note(ctxs, images, ran=True)
        return [
            self._result(ctx) if outcome is None else outcome
            for ctx, outcome in zip(ctxs, outcomes, strict=True)
        ]

    def _note(self, ctxs: Sequence[RunContext], images: int, *, ran: bool) -> None:
        ids = tuple(ctx.job.id for ctx in ctxs)
        if len(ids) == 1:
            return
        with self._lock:
            self._batches.append(BatchRecord(ids, images, ran))
        for ctx in ctxs:
            with open_to_append(ctx.workdir / BATCH_LOG) as log:
                log.write(f"attempt {ctx.job.attempt} {'ran' if ran else 'oom'}: {' '.join(ids)}\n")

    def _result(self, ctx: RunContext) -> JobResult:
        with open_to_append(ctx.workdir / RUN_LOG) as log:
            log.write(f"attempt {ctx.job.attempt} succeeded\n")
        result = SIMULATED_KINDS[ctx.job.kind].result(ctx)
        if ctx.job.kind is JobKind.INFERENCE and "capture" in ctx.job.params:
            return self._captured(ctx, result)
        return result

    def _captured(self, ctx: RunContext, result: JobResult) -> JobResult:
        """Each fake image through capture, as a gray picture of its size."""
        params = CaptureParams.model_validate(ctx.job.params["capture"])
        capture = job_capture(self._capture, ctx.job, params)
        assert capture is not None
        for number, entry in enumerate(result.detail["images"], start=1):
            capture.offer(entry, partial(_gray_jpeg, entry["width"], entry["height"]), number)
        return JobResult({**result.summary, "capture": capture.summary()}, result.detail)


def _inputs(ctx: RunContext) -> list[str]:
    return ctx.job.spec.inputs if isinstance(ctx.job.spec, InferenceSpec) else []


def _inference_result(ctx: RunContext) -> JobResult:
    """As if the model had a variant of the job's format (`auto` runs the `.pt`)."""
    ran = str(ctx.job.params.get("format", "auto"))
    images = [_fake_detections(name) for name in _inputs(ctx)]
    total = sum(len(image["detections"]) for image in images)
    summary: JsonObject = {
        "images": len(images),
        "detections": total,
        "failed_images": 0,
        "format": "pt" if ran == "auto" else ran,
        "variant_id": None,
    }
    return JobResult(summary=summary, detail={"images": images})


def _gray_jpeg(width: int, height: int) -> bytes:
    from PIL import Image

    encoded = io.BytesIO()
    Image.new("RGB", (width, height), (128, 128, 128)).save(encoded, "JPEG")
    return encoded.getvalue()


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


def _training_result(ctx: RunContext) -> JobResult:
    epochs = int(ctx.job.params.get("sim_steps", 5))
    history = _history(epochs, ctx.job.params)
    metrics = {name: history[-1][name] for name in _SCORES}  # the last epoch's, as real ones
    return JobResult(
        summary={"epochs": epochs, "metrics": metrics, "model_id": None},
        detail={
            "model": None,
            "epochs": epochs,
            "metrics": metrics,
            "history": history,
            "artifacts": [],
        },
    )


_SCORES = ("precision", "recall", "mAP50", "mAP50-95")
SIM_BEST_LR0 = 0.02
"""The learning rate a simulated training scores best at: a tune has something to find."""


def _fit(params: JsonObject) -> float:
    """How well a simulated training's params suit it, in (0, 1]: 1 at `SIM_BEST_LR0`, falling
    on a log scale away from it (0.78 at the default 0.01, 0.08 at 0.001)."""
    lr0 = float(params.get("lr0", 0.01))
    return math.exp(-((math.log10(lr0 / SIM_BEST_LR0) / 0.6) ** 2))


def _history(epochs: int, params: JsonObject) -> list[JsonObject]:
    """Falling losses and rising scores, one entry per epoch, in the shape real training writes;
    the scores scaled by how well the params suit it (`_fit`), so that a search can tell good
    params from bad ones epoch by epoch."""
    scale = 0.5 + 0.5 * _fit(params)
    return [
        {
            "epoch": epoch,
            "train_loss": _losses(3.0 / (1 + 0.5 * epoch)),
            "val_loss": _losses(3.2 / (1 + 0.4 * epoch)),
            "precision": round((0.9 - 0.6 / epoch) * scale, 4),
            "recall": round((0.85 - 0.6 / epoch) * scale, 4),
            "mAP50": round((0.8 - 0.6 / epoch) * scale, 4),
            "mAP50-95": round((0.55 - 0.45 / epoch) * scale, 4),
        }
        for epoch in range(1, epochs + 1)
    ]


def _losses(total: float) -> JsonObject:
    return {
        "box_loss": round(total * 0.4, 5),
        "cls_loss": round(total * 0.35, 5),
        "dfl_loss": round(total * 0.25, 5),
    }


def _validation_result(ctx: RunContext) -> JobResult:
    split = ctx.job.spec_as(ValidationSpec).split
    metrics = _fake_metrics(ctx.job.id)
    summary = {"task": "detect", "split": split, "images": 4, "metrics": metrics}
    detail: JsonObject = {
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


def _export_result(ctx: RunContext) -> JobResult:
    summary = {"model_id": None, "variant_id": None, "format": str(ctx.job.params["format"])}
    return JobResult(summary=summary, detail={**summary, "variant": None})


@dataclass(frozen=True)
class SimulatedKind:
    """How the simulated runner fakes a kind of job."""

    result: Callable[[RunContext], JobResult]
    """What a run that succeeds returns, in the shape of the kind's real runner's result."""
    epochs: bool = False
    """Each step is an epoch: its metrics are written as a training's are."""


SIMULATED_KINDS: dict[JobKind, SimulatedKind] = {
    JobKind.INFERENCE: SimulatedKind(_inference_result),
    JobKind.TRAINING: SimulatedKind(_training_result, epochs=True),
    JobKind.VALIDATION: SimulatedKind(_validation_result),
    JobKind.EXPORT: SimulatedKind(_export_result),
}
"""By kind: a new kind's line here is its simulated runner."""
