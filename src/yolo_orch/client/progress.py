"""A job being followed, shown live: a bar on a terminal; elsewhere (a log, a pipe) a line each
time its state, or a training job's epoch, changes."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Column
from rich.text import Text

from yolo_orch.client.render import job_line, progress_text
from yolo_orch.client.shapes import Job
from yolo_orch.client.summary import completed_epochs, training_status

_BAR_WIDTH = 20
"""Narrower than rich's 40: room for a training job's epoch, loss and scores beside it."""

Metrics = Callable[[str], list[dict[str, Any]]]
"""A training job's metrics per epoch, by its id (`Client.metrics`)."""


class JobProgress:
    def __init__(
        self, console: Console, job_id: str, metrics: Metrics, *, silent: bool = False
    ) -> None:
        self._console = console
        self._silent = silent
        self._job_id = job_id
        self._metrics = metrics
        self._history: list[dict[str, Any]] = []
        self._epochs_read = 0
        self._last_line: str | None = None
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        if console.is_terminal and not silent:
            self._bar = Progress(
                SpinnerColumn(),
                TextColumn("[bold]{task.description}"),
                BarColumn(bar_width=_BAR_WIDTH),
                TimeElapsedColumn(table_column=Column(min_width=7, no_wrap=True)),
                # Last, and the one a narrow terminal cuts.
                TextColumn(
                    "{task.fields[count]}",
                    table_column=Column(ratio=1, no_wrap=True, overflow="ellipsis"),
                ),
                console=console,
                transient=True,
            )

    def __enter__(self) -> JobProgress:
        if self._bar is not None:
            self._bar.start()
            self._task = self._bar.add_task(f"job {self._job_id[:8]} ...", total=None, count="")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.stop()

    def update(self, job: Job) -> None:
        if self._silent:
            return
        count = self._count(job)
        if self._bar is None or self._task is None:
            # A line per state (and per epoch), not per progress tick; the final state is the
            # caller's to show.
            line = job_line(job) if job.kind != "training" else _training_line(job, count)
            if line != self._last_line and not job.state.is_terminal:
                self._console.print(Text(line), soft_wrap=True)
            self._last_line = line
            return
        progress = job.progress
        self._bar.update(
            self._task,
            description=f"job {self._job_id[:8]} {job.state}",
            completed=progress.done if progress else 0,
            total=(progress.total or None) if progress else None,
            count=count,
        )

    def _count(self, job: Job) -> str:
        """Training: its epoch, loss and scores; others: `3/5 images`."""
        if job.kind != "training" or job.state != "running":
            return progress_text(job) if job.progress else ""
        epochs = completed_epochs(job)
        if epochs > self._epochs_read:  # an epoch ended: its scores are in the metrics now
            self._history = self._metrics(job.id)
            self._epochs_read = epochs
        return training_status(job, self._history)


def _training_line(job: Job, status: str) -> str:
    if job.state != "running" or not status:
        return job_line(job)
    return f"job {job.id} running on {', '.join(job.devices) or '?'}: {status}"
