"""What a runner is given and must return. Runners run in worker threads and know nothing of
HTTP, SQL or the event loop: they see a job, its devices, a progress callback and a cancel check."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from yolo_orch.domain import Job, JobKind, JobResult, Progress


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
