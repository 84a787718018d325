"""What a runner is given and must return. Runners run in worker threads and know nothing of
HTTP, SQL or the event loop: they see a job, its devices, a progress callback and a cancel check."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from yolo_orch.domain import Job, JobKind, JobResult, Progress
from yolo_orch.errors import ErrorCode
from yolo_orch.runners.failures import failure_of


@dataclass(frozen=True)
class RunContext:
    job: Job
    devices: tuple[str, ...]
    """The lanes this job holds, in ascending order (`cuda:0`, `cpu`, `sim:1`, ...)."""
    workdir: Path
    """`{data_dir}/jobs/{id}`: the job's own folder for inputs, checkpoints and artifacts."""
    report_progress: Callable[[Progress], None]
    should_cancel: Callable[[], bool]
    """Ask at safe points (between images, batches or steps); raise `JobCancelled` when true."""
    switch_model: Callable[[str], None] = lambda model_id: None
    """Record that the job runs another registry model from now on (a stream whose alias
    moved); from the worker thread, it must not block. Not given: not recorded."""


class Runner(Protocol):
    def run(self, ctx: RunContext) -> JobResult:
        """Blocking. Raise `JobCancelled` on cancel, `InvalidJobInput` for unusable input; any
        other exception fails the job (a `RuntimeError` saying "out of memory" as `cuda_oom`)."""
        ...


class Runtime(Protocol):
    """Where jobs run and what they can use: the lanes of this host and a runner per kind."""

    name: str

    def lanes(self) -> list[str]: ...

    def runner(self, kind: JobKind) -> Runner: ...

    def provides(self, model: str, kind: JobKind) -> bool:
        """Whether `model` is one this runtime has itself for jobs of `kind`, without the
        weights registry (`sim`; a shipped architecture to train from scratch). Blocking."""
        ...

    def model_task(self, model: str) -> str | None:
        """The task of a model this runtime provides (`detect` for `yolo11n.yaml`); None for
        models without one (`sim`). Blocking."""
        ...

    def cached_models(self, lane: str) -> list[str]:
        """sha256s of the weights loaded on `lane`."""
        ...

    def cache_stats(self) -> tuple[int, int]:
        """Model cache hits and misses (loads) since start."""
        ...

    def uploaded(self, paths: Sequence[Path]) -> None:
        """An accepted job's uploaded images, saved at `paths`: the runtime may start reading
        them before the job runs. Never blocks."""
        ...

    def decoded_ahead(self) -> int:
        """Images whose job found them decoded ahead, since start."""
        ...


BatchOutcome = JobResult | Exception
"""What one job of a batch came to: its result, or what failed it alone."""


@runtime_checkable
class BatchRunner(Runner, Protocol):
    def run_batch(self, ctxs: Sequence[RunContext]) -> list[BatchOutcome]:
        """Blocking. Run the jobs' images through shared forward passes; answer for each job in
        order (a job's cancel, or its unusable input, is its own `Exception`). Raise only for what
        fails the pass itself (CUDA out of memory, a sticky CUDA error)."""
        ...


def split_on_oom(
    run_batch: Callable[[Sequence[RunContext]], list[BatchOutcome]], ctxs: Sequence[RunContext]
) -> list[BatchOutcome]:
    """Run the batch; when its forward pass runs out of memory, run each half on its own (and
    their halves, down to single jobs) before failing anyone. Any other failure of the pass is
    every job's."""
    try:
        return run_batch(ctxs)
    except Exception as exc:
        if len(ctxs) == 1 or failure_of(exc).code != ErrorCode.CUDA_OOM:
            return [exc] * len(ctxs)
        half = len(ctxs) // 2
        return split_on_oom(run_batch, ctxs[:half]) + split_on_oom(run_batch, ctxs[half:])


def run_each(runner: Runner, ctxs: Sequence[RunContext]) -> list[BatchOutcome]:
    """A batch through a runner that cannot share a pass: one job after another."""
    outcomes: list[BatchOutcome] = []
    for ctx in ctxs:
        try:
            outcomes.append(runner.run(ctx))
        except Exception as exc:
            outcomes.append(exc)
    return outcomes


def run_batch(runner: Runner, ctxs: Sequence[RunContext]) -> list[BatchOutcome]:
    """Blocking: the batch through `runner`, its pass split on OOM (see `split_on_oom`)."""
    if isinstance(runner, BatchRunner):
        return split_on_oom(runner.run_batch, ctxs)
    return run_each(runner, ctxs)


@dataclass(frozen=True)
class BatchRecord:
    """One forward pass shared by jobs: what tests and the batch log assert on."""

    job_ids: tuple[str, ...]
    images: int
    ran: bool = True
    """False when the pass ran out of memory (and was split)."""
