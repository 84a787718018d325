"""What the dispatcher keeps about each run and each batch, and how what a runner returned
becomes the job's outcome."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import anyio.to_thread

from yolo_orch.dispatch.lanes import Lane
from yolo_orch.domain import Job, JobError, JobResult, JobState, Outcome, Progress
from yolo_orch.errors import JobCancelled, RunLost
from yolo_orch.files.jobfiles import JobFiles
from yolo_orch.files.shown_paths import ShownPaths
from yolo_orch.ops.logs import for_job
from yolo_orch.runners.base import BatchOutcome, RunContext
from yolo_orch.runners.failures import failure_of

log = logging.getLogger(__name__)


@dataclass
class Run:
    job_id: str
    cancel: threading.Event = field(default_factory=threading.Event)
    task: asyncio.Task[None] | None = None
    progress: Progress | None = None
    progress_writer: asyncio.TimerHandle | asyncio.Task[None] | None = None
    """What writes its progress: the timer before the first write, then the writing task."""
    lanes: tuple[Lane, ...] = ()
    timeout_s: float = 0.0
    started: float = 0.0
    moved: float = 0.0
    """Loop time of the last progress that changed anything (or of the start)."""
    stopped_by: JobError | None = None
    """Why the watchdog told the run to stop: its outcome is this failure, whatever it returns."""
    stopped_at: float = 0.0
    stream: bool = False
    """A live stream's run: it never ends by itself, so a drain leaves it at once."""


@dataclass
class Batch:
    """Jobs sharing one turn of a lane: the turn is taken in `holder`'s name (the job at the head
    of the queue), and held until every job of the batch has ended."""

    holder: str
    lanes: tuple[Lane, ...]
    jobs: list[Job] = field(default_factory=list)
    """Claimed, in start order."""
    runs: list[Run] = field(default_factory=list)
    room: int = 0
    """Images more that its forward passes may take."""
    formed: float = 0.0


OnBatch = Callable[[str, int, float], None]
"""Called once per run on a lane that batches: the lane, the jobs sharing the run, and the
seconds the batch waited for companions."""


def run_context(
    job: Job,
    run: Run,
    workdir: Path,
    note_progress: Callable[[Run, Progress], None],
    note_model: Callable[[Run, str], None],
) -> RunContext:
    """What the runner of `run` gets; its progress reports reach `note_progress`, and a switch
    of model (a stream whose alias moved) `note_model`, on this loop."""
    loop = asyncio.get_running_loop()

    def report_progress(progress: Progress) -> None:  # called from the worker thread
        # The loop is gone once a run was abandoned at shutdown.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(note_progress, run, progress)

    def switch_model(model_id: str) -> None:  # called from the worker thread
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(note_model, run, model_id)

    return RunContext(
        job=job,
        devices=tuple(lane.id for lane in run.lanes),
        workdir=workdir,
        report_progress=report_progress,
        should_cancel=run.cancel.is_set,
        switch_model=switch_model,
    )


async def leave_running(
    runs: dict[asyncio.Task[None], list[Run]], grace_s: float, files: JobFiles
) -> list[str]:
    """Give the runs (by the task running them) `grace_s` to end, then leave the rest: each
    told to stop (cooperative runners stop soon), its task cancelled so that no outcome is
    recorded, and noted as left by a graceful stop (they need not run alone at the next start).
    Streams never end by themselves: they are left at once, to resume at the next start. The
    jobs left, which stay RUNNING for recovery."""
    if not runs:
        return []
    streams = {task for task, task_runs in runs.items() if any(run.stream for run in task_runs)}
    others = runs.keys() - streams
    pending = set(streams)
    if others:
        pending |= (await asyncio.wait(others, timeout=grace_s))[1]
    left = [run.job_id for task in pending for run in runs[task]]
    for task in pending:
        for run in runs[task]:
            run.cancel.set()
        task.cancel()
    if left:
        await anyio.to_thread.run_sync(files.note_abandoned, left)
    await asyncio.gather(*pending, return_exceptions=True)
    return left


def outcome_of(run: Run, job_id: str, raw: BatchOutcome, shown: ShownPaths) -> Outcome:
    """The outcome to record for a run that returned or raised `raw`: a stop the watchdog asked
    for wins over what the runner made of it. What was raised names the server's files as
    `shown` has them: the error reaches clients, and the job's log."""
    if isinstance(raw, JobCancelled):
        if run.stopped_by is not None:
            return Outcome(JobState.FAILED, error=run.stopped_by, progress=run.progress)
        return Outcome(JobState.CANCELLED, progress=run.progress)
    if isinstance(raw, Exception):
        failure = failure_of(raw)
        error = run.stopped_by or replace(failure, message=shown.text(failure.message))
        log.warning(
            "job %s failed: %s: %s", job_id, error.code, error.message, extra=for_job(job_id)
        )
        return Outcome(JobState.FAILED, error=error, progress=run.progress)
    if run.stopped_by is not None:  # it ignored the stop, but not for long
        return Outcome(JobState.FAILED, error=run.stopped_by, progress=run.progress)
    return Outcome(
        JobState.SUCCEEDED, result=raw.summary, progress=run.progress, kept_result=raw.encoded
    )


async def with_result_kept(files: JobFiles, job_id: str, raw: BatchOutcome) -> BatchOutcome:
    """`raw` with its result ready to be recorded: a small one encoded here, on the event loop
    (bounded by `inline_result_bytes`: a small job takes no thread hop for it), to be committed
    with the outcome; a larger one written to its file on a thread of its own (a batch's fsyncs
    overlap rather than queue), durable before the job may be marked succeeded. A result that
    cannot be encoded or written fails its job (alone)."""
    if not isinstance(raw, JobResult):
        return raw
    try:
        small = files.small_result(raw.detail)
    except Exception as exc:
        return exc
    if small is not None:
        return replace(raw, encoded=small)
    return await anyio.to_thread.run_sync(_write_result, files, job_id, raw)


def _write_result(files: JobFiles, job_id: str, result: JobResult) -> BatchOutcome:
    try:
        files.write_result(job_id, result.detail)
    except Exception as exc:
        return exc
    return result


async def outcomes_kept(
    files: JobFiles,
    runs: Mapping[str, Run],
    ctxs: Sequence[RunContext],
    raw: Sequence[BatchOutcome],
    shown: ShownPaths,
) -> list[Outcome | RunLost]:
    """What each of a batch's runs (`ctxs`) returned or raised (`raw`), as the outcome to record,
    its result kept (`with_result_kept`); a lost run stays lost."""
    if len(ctxs) == 1:  # the usual case, without the tasks of a gather
        kept = [await with_result_kept(files, ctxs[0].job.id, raw[0])]
    else:
        kept = await asyncio.gather(
            *(
                with_result_kept(files, ctx.job.id, outcome)
                for ctx, outcome in zip(ctxs, raw, strict=True)
            )
        )
    return [
        outcome
        if isinstance(outcome, RunLost)
        else outcome_of(runs[ctx.job.id], ctx.job.id, outcome, shown)
        for ctx, outcome in zip(ctxs, kept, strict=True)
    ]
