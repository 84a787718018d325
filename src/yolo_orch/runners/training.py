"""Training jobs: ultralytics' trainer for the model's task (`runners.trainers`) in the job's worker
thread, on the job's lanes.

Decisions (measurements and reasons in ULTRALYTICS.md):
- One device for ultralytics (`"0"`-style or `"cpu"`), so it never launches DDP subprocesses, which
  would take progress and cancel out of this process. With k > 1 CUDA lanes only the images go
  through `nn.DataParallel` (`runners.trainers`); the split is injectable (`make_parallel`) so it
  can be exercised on a CPU.
- The task comes from the model (a registry checkpoint's, or a shipped config's head); the dataset
  must be one for that task (`yolo_orch.files.task_data`), checked at submission and again here.
- `amp=False`: ultralytics' AMP check loads (downloads) a model on CUDA, and bf16, which skips the
  check, is not carried into DataParallel's replica threads (they autocast to fp16). fp32 costs
  speed and memory on GPUs; it is the safe choice until measured otherwise.
- `compile=False`, `plots=False`, no `batch=-1` (AutoBatch sizes for one GPU), and
  `deterministic=False`: deterministic mode flips process-wide torch switches that would slow and
  warn in every other job of this process.
- `workers` (DataLoader processes) defaults to 0: batches load in this thread. A forked child of a
  multi-threaded server inherits locks other threads held (allocator, logging, OpenMP) and can hang,
  so workers > 0 start through a `forkserver` context instead of fork (the workers import the
  process's `__main__`, which must keep its start-up under `if __name__ == "__main__"`).
  ultralytics itself uses 0 on the CPU.
- Seeds: ultralytics reseeds `random`, NumPy and torch process-wide when a trainer starts, so two
  trainings (or a training and anything random) in one process disturb each other's determinism.
- Resume: ultralytics writes `last.pt` after each completed epoch. A run that finds one in its
  workdir (the server requeued it after a crash) resumes at the next epoch; a finished one (the
  optimizer stripped, or the final epoch saved) only registers its result; an unreadable one (a
  crash while it was written) is ignored and training starts again.
- Cancel: `JobCancelled` is raised from batch callbacks (training and validation): `last.pt` of the
  last completed epoch stays resumable (`trainer.stop = True` would strip it).

Call `configure_ultralytics` before constructing the runner (offline, safe load).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yolo_orch.domain import JobResult, JsonObject, Progress
from yolo_orch.errors import JobCancelled
from yolo_orch.files.jobfiles import METRICS_FILE, write_atomic
from yolo_orch.params.training import TrainingParams
from yolo_orch.runners.base import RunContext
from yolo_orch.runners.inference import default_cpu_threads
from yolo_orch.runners.sources import (
    ResolveWeights,
    job_dataset,
    registry_weights,
    shipped_architecture,
)
from yolo_orch.runners.task_metrics import scores
from yolo_orch.runners.trainers import (
    MakeParallel,
    data_parallel,
    trainer_class,
    ultralytics_device,
)

if TYPE_CHECKING:
    from ultralytics.engine.trainer import BaseTrainer

__all__ = ["YoloTrainingRunner"]

log = logging.getLogger(__name__)

RegisterModel = Callable[[Path, str, str], JsonObject]
"""Registers `best.pt` under a name for the job with that id; returns the model's public view."""

RUN_NAME = "train"
ARTIFACTS = ("best.pt", "last.pt", "results.csv")


class YoloTrainingRunner:
    """Runs training jobs: `spec.dataset_path` (a checked dataset) on the job's lanes."""

    def __init__(
        self,
        resolve_weights: ResolveWeights,
        register_model: RegisterModel,
        *,
        data_roots: Sequence[Path],
        make_parallel: MakeParallel = data_parallel,
        cpu_threads: int | None = None,
    ) -> None:
        """`data_roots`: the dataset is checked again when the job starts."""
        self._resolve_weights = resolve_weights
        self._register_model = register_model
        self._data_roots = tuple(data_roots)
        self._make_parallel = make_parallel
        self._cpu_threads = cpu_threads if cpu_threads is not None else default_cpu_threads()

    def run(self, ctx: RunContext) -> JobResult:
        import torch

        params = TrainingParams.from_job(ctx.job.params)
        device = ultralytics_device(ctx.devices)
        ctx.workdir.mkdir(parents=True, exist_ok=True)
        source, task = self._model_source(ctx)
        data, _ = job_dataset(ctx, task, self._data_roots)
        run_dir = ctx.workdir / RUN_NAME
        last = run_dir / "weights" / "last.pt"
        tracker = _Tracker(ctx, ctx.workdir / METRICS_FILE)
        try:
            state = _checkpoint_state(last, params.epochs)
            if state == "finished":
                tracker.load_history()
            else:
                overrides = _overrides(params, task, data, device, ctx.workdir)
                if state == "resumable":
                    overrides = _resume_overrides(overrides, last, run_dir)
                else:
                    overrides["model"] = source
                self._train(ctx, task, overrides, tracker)
        except JobCancelled:
            _publish(run_dir, ctx.workdir / "artifacts")  # what the epochs so far made
            raise
        except torch.cuda.OutOfMemoryError as e:
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            raise RuntimeError(f"CUDA out of memory: {e}") from e
        return self._finish(ctx, params, run_dir, tracker)

    def _model_source(self, ctx: RunContext) -> tuple[str, str]:
        """A registry checkpoint to fine-tune, or a shipped architecture to train from scratch,
        and its task."""
        if ctx.job.model_id is None:
            return ctx.job.model, shipped_architecture(ctx.job.model)
        path, task = registry_weights(self._resolve_weights, ctx)
        return str(path), task

    def _train(
        self, ctx: RunContext, task: str, overrides: dict[str, Any], tracker: _Tracker
    ) -> None:
        import torch

        trainer = trainer_class(task)(overrides=overrides)
        if len(ctx.devices) > 1:
            lanes = ctx.devices
            trainer.parallel = lambda model: self._make_parallel(model, lanes)
        torch.set_num_threads(self._cpu_threads if ctx.devices[0] == "cpu" else 1)
        for event in ("on_train_start", "on_train_epoch_start", "on_train_batch_end"):
            trainer.add_callback(event, getattr(tracker, event))
        trainer.add_callback("on_fit_epoch_end", tracker.on_fit_epoch_end)
        trainer.add_callback("on_val_batch_end", tracker.check_cancel)
        try:
            trainer.train()
        finally:
            for name in ("train_loader", "test_loader"):  # workers outlive an exception otherwise
                close = getattr(getattr(trainer, name, None), "close", None)
                if close is not None:
                    close()

    def _finish(
        self, ctx: RunContext, params: TrainingParams, run_dir: Path, tracker: _Tracker
    ) -> JobResult:
        weights = run_dir / "weights"
        if not (weights / "best.pt").is_file():
            shown = (weights / "best.pt").relative_to(ctx.workdir)  # the job's, not the server's
            raise RuntimeError(f"training ended without {shown} in the job's folder")
        artifacts = ctx.workdir / "artifacts"
        names = _publish(run_dir, artifacts)
        output_name = params.output_name or f"train-{ctx.job.id[:8]}"
        model = self._register_model(artifacts / "best.pt", output_name, ctx.job.id)
        final = tracker.final or (_entry_scores(tracker.history[-1]) if tracker.history else {})
        epochs = tracker.history[-1]["epoch"] if tracker.history else 0
        return JobResult(
            summary={"model_id": model["id"], "epochs": epochs, "metrics": final},
            detail={
                "model": model,
                "epochs": epochs,
                "metrics": final,
                "history": tracker.history,
                "artifacts": names,
            },
        )


class _Tracker:
    """Progress over all epochs' batches, cancel checks, the per-epoch metrics file, and a
    line per epoch in the job's log."""

    def __init__(self, ctx: RunContext, metrics_path: Path) -> None:
        self._ctx = ctx
        self._path = metrics_path
        self.history: list[JsonObject] = []
        self.final: JsonObject | None = None
        """Scores of best.pt in ultralytics' final validation."""
        self._done = 0
        self._total = 0
        self._in_epoch = False
        self._epoch_started = time.monotonic()

    def load_history(self, through_epoch: int | None = None) -> None:
        """Epochs recorded by an earlier attempt (all, or the first `through_epoch`)."""
        try:
            loaded = json.loads(self._path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            loaded = []
        entries = loaded if isinstance(loaded, list) else []
        self.history = [
            e
            for e in entries
            if isinstance(e, dict) and (through_epoch is None or e.get("epoch", 0) <= through_epoch)
        ]

    def check_cancel(self, _owner: object = None) -> None:
        if self._ctx.should_cancel():
            raise JobCancelled(f"cancelled after {self._done} of {self._total} batches")

    def on_train_start(self, trainer: BaseTrainer) -> None:
        """A resumed run keeps what an earlier attempt recorded up to where it resumes."""
        if trainer.start_epoch:
            self.load_history(through_epoch=trainer.start_epoch)
        else:
            self.history = []

    def on_train_epoch_start(self, trainer: BaseTrainer) -> None:
        self._epoch_started = time.monotonic()
        # Recomputed each epoch: ultralytics halves the batch (more batches) after an early OOM.
        batches = len(trainer.train_loader)
        self._done = trainer.epoch * batches
        self._total = trainer.epochs * batches
        self._in_epoch = True
        self._ctx.report_progress(Progress(self._done, self._total, "batches"))

    def on_train_batch_end(self, trainer: BaseTrainer) -> None:
        self._done += 1
        batches = len(trainer.train_loader)
        loss: dict[str, Any] = trainer.tloss or {}
        detail: JsonObject = {
            "epoch": trainer.epoch + 1,
            "epochs": trainer.epochs,
            "batch": self._done - trainer.epoch * batches,
            "batches": batches,
            "loss": {str(k): round(float(v), 5) for k, v in loss.items()},
        }
        self._ctx.report_progress(Progress(self._done, self._total, "batches", detail))
        self.check_cancel()

    def on_fit_epoch_end(self, trainer: BaseTrainer) -> None:
        """After each epoch's validation, and once more after the final validation of best.pt."""
        metrics: dict[str, Any] = dict(trainer.metrics or {})
        if not self._in_epoch:
            self.final = scores(metrics)
            log.info("best.pt validated: %s", _shown(self.final) or "no scores")
            return
        self._in_epoch = False
        loss: dict[str, Any] = trainer.tloss or {}
        entry: JsonObject = {
            "epoch": trainer.epoch + 1,
            "train_loss": {str(k): round(float(v), 5) for k, v in loss.items()},
            "val_loss": {
                k.removeprefix("val/"): round(float(v), 5)
                for k, v in metrics.items()
                if k.startswith("val/")
            },
            **scores(metrics),
        }
        self.history.append(entry)
        write_atomic(self._path, json.dumps(self.history, indent=1).encode(), durable=False)
        log.info("%s", _epoch_line(entry, trainer.epochs, time.monotonic() - self._epoch_started))


MAIN_SCORES = (
    *("mAP50", "mAP50-95", "mask_mAP50", "mask_mAP50-95", "pose_mAP50", "pose_mAP50-95"),
    *("top1", "top5", "mIoU", "pixel_acc", "delta1", "abs_rel", "rmse"),
)
"""The scores an epoch's log line shows, those the task has (`/metrics` has them all)."""


def _epoch_line(entry: JsonObject, epochs: int, seconds: float) -> str:
    """`epoch 3/10: train loss box 1.21 cls 2.9 dfl 1.3; val loss ...; mAP50 0.41 mAP50-95
    0.22; 12.5 s`: one line a person reads per epoch (its validation counted in its time)."""
    parts = [
        f"{kind} loss "
        + " ".join(f"{name.removesuffix('_loss')} {value:.4g}" for name, value in losses.items())
        for kind, losses in (("train", entry["train_loss"]), ("val", entry["val_loss"]))
        if losses
    ]
    parts += [_shown(entry), f"{seconds:.1f} s"]
    return f"epoch {entry['epoch']}/{epochs}: " + "; ".join(part for part in parts if part)


def _shown(found: JsonObject) -> str:
    return " ".join(
        f"{name} {found[name]:.4g}" for name in MAIN_SCORES if isinstance(found.get(name), float)
    )


def _entry_scores(entry: JsonObject) -> JsonObject:
    return {k: v for k, v in entry.items() if k not in ("epoch", "train_loss", "val_loss")}


def _checkpoint_state(last: Path, epochs: int) -> str:
    """`none`, `resumable` or `finished`: what an earlier attempt left in `last.pt`."""
    if not last.is_file():
        return "none"
    from ultralytics.nn.tasks import torch_safe_load

    try:
        ckpt, _ = torch_safe_load(str(last), safe_only=True)  # type: ignore[no-untyped-call]
        epoch = int(ckpt.get("epoch", -1))
        resumable = ckpt.get("optimizer") is not None
    except Exception as e:  # written by a crashed attempt: every way it fails means start again
        log.warning("ignoring unreadable checkpoint %s: %s", last, e)
        return "none"
    if not resumable or epoch + 1 >= epochs:
        return "finished" if (last.parent / "best.pt").is_file() else "none"
    return "resumable"


def _overrides(
    params: TrainingParams, task: str, data: str, device: str, workdir: Path
) -> dict[str, Any]:
    return {
        "data": data,
        "task": task,
        "mode": "train",
        "epochs": params.epochs,
        "imgsz": params.imgsz,
        "batch": params.batch,
        "patience": params.patience,
        "lr0": params.lr0,
        "optimizer": params.optimizer,
        "seed": params.seed,
        "workers": params.workers,
        "device": device,
        "project": str(workdir),
        "name": RUN_NAME,
        "exist_ok": True,
        "amp": False,
        "compile": False,
        "plots": False,
        "deterministic": False,
        "val": True,
        "save": True,
        "cache": False,
        "verbose": False,
    }


def _resume_overrides(overrides: dict[str, Any], last: Path, run_dir: Path) -> dict[str, Any]:
    """A resumed run takes its settings from last.pt, except where it runs, reads and writes
    (the lanes, or the data folder, may differ after a restart)."""
    kept = {key: overrides[key] for key in ("data", "device", "workers")}
    return {**kept, "resume": str(last), "save_dir": str(run_dir)}


def _publish(run_dir: Path, artifacts: Path) -> list[str]:
    """Copy what the run has made of `ARTIFACTS` where clients fetch a job's files (each
    renamed into place whole); their names. A cancelled run publishes its `last.pt` too."""
    artifacts.mkdir(exist_ok=True)
    names = []
    for name in ARTIFACTS:
        source = run_dir / name if name.endswith(".csv") else run_dir / "weights" / name
        if source.is_file():
            tmp = artifacts / f".{name}.tmp"
            shutil.copyfile(source, tmp)
            os.replace(tmp, artifacts / name)
            names.append(name)
    return names
