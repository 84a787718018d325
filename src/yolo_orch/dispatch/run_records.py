"""What the dispatcher writes about a run besides its claim: its progress, at most one write per
interval, and its outcome, retried (a run lost with its node: the job back in the queue)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable

from yolo_orch.dispatch.executor import Executor
from yolo_orch.dispatch.runs import Run
from yolo_orch.domain import Job, JobError, JobState, Outcome, Progress
from yolo_orch.errors import ErrorCode, JobAlreadyFinished, RunLost
from yolo_orch.ops.clock import utcnow
from yolo_orch.ops.logs import for_job
from yolo_orch.store.base import JobStore

log = logging.getLogger(__name__)

_RECORD_RETRIES_S = (0.5, 2.0, 5.0)

OnRunEnd = Callable[[Job, Outcome, float], None]
"""Called with each recorded outcome and the seconds its batch took to run and record."""


class ProgressWriter:
    """Writes the newest progress of each run at most once per `interval_s`, so a runner that
    reports every image does not turn into one database write per image."""

    def __init__(self, store: JobStore, interval_s: float) -> None:
        self._store = store
        self._interval_s = interval_s
        self._switches: set[asyncio.Task[None]] = set()
        """Writes of the models running streams switched to (kept until done)."""

    def switched(self, run: Run, model_id: str) -> None:
        """On the event loop: the run's job runs `model_id` from now on (a stream whose alias
        moved); written at once, and only once: it is rare."""
        task = asyncio.create_task(self._record_model(run.job_id, model_id))
        self._switches.add(task)
        task.add_done_callback(self._switches.discard)

    async def _record_model(self, job_id: str, model_id: str) -> None:
        try:
            await self._store.switch_model(job_id, model_id)
        except Exception:  # the stream runs the new model whatever its record says
            log.warning("could not record job %s's switch to %s", job_id, model_id, exc_info=True)

    def note(self, run: Run, progress: Progress) -> None:
        """On the event loop: `progress` is the run's newest."""
        loop = asyncio.get_running_loop()
        if progress != run.progress:
            run.moved = loop.time()
        run.progress = progress
        if run.progress_writer is None:
            # A timer, not a task that sleeps: most runs end within the first interval, and
            # write no progress (their outcome has it).
            run.progress_writer = loop.call_later(self._interval_s, self._start, run)

    def _start(self, run: Run) -> None:
        run.progress_writer = asyncio.create_task(self._write(run))

    async def _write(self, run: Run) -> None:
        written = None
        while run.progress is not None and run.progress != written:
            written = run.progress
            try:
                await self._store.set_progress(run.job_id, written)
            except Exception:  # progress is advisory: the outcome is what must be recorded
                log.warning("could not record the progress of job %s", run.job_id, exc_info=True)
            await asyncio.sleep(self._interval_s)
        run.progress_writer = None  # the next report starts the timer again


async def record_outcome(store: JobStore, job_id: str, outcome: Outcome) -> None:
    """The outcome, retried for a while: a job whose end is not recorded would read as running
    until the next restart."""
    for delay in (*_RECORD_RETRIES_S, None):
        try:
            await store.finish(job_id, outcome, utcnow())
            return
        except JobAlreadyFinished:
            return
        except Exception:
            if delay is None:
                raise
            log.warning("recording job %s failed; retrying in %ss", job_id, delay)
            await asyncio.sleep(delay)


async def record_outcomes(
    store: JobStore,
    executor: Executor,
    ran: Iterable[tuple[Job, Outcome | RunLost]],
    started: float,
    on_run_end: OnRunEnd | None,
    unclaimed: Iterable[str] = (),
) -> list[tuple[Job, Outcome]]:
    """Record how a batch's runs ended, started at loop time `started`: a lost run (its node
    left) puts its job back in the queue, as after a crash. Then the executor lets go of what
    it keeps of the runs whose end is committed (on a cluster: the actors' buffers), and of
    the `unclaimed` runs (cancelled before their claims: nothing to record); a job whose
    outcome could not be recorded keeps its run for a restart. The jobs that had an outcome,
    with it, recorded or not."""
    ended: list[tuple[Job, Outcome]] = []
    settled: list[str] = list(unclaimed)
    for job, outcome in ran:
        if isinstance(outcome, RunLost):
            log.warning(
                "job %s: %s; back to the queue", job.id, outcome.message, extra=for_job(job.id)
            )
            with contextlib.suppress(JobAlreadyFinished):
                await store.requeue(job.id, utcnow())
            settled.append(job.id)
        else:
            ended.append((job, outcome))
    recorded = await asyncio.gather(
        *(record_outcome(store, job.id, outcome) for job, outcome in ended),
        return_exceptions=True,
    )
    seconds = asyncio.get_running_loop().time() - started
    for (job, outcome), failed in zip(ended, recorded, strict=True):
        if isinstance(failed, BaseException):
            log.error(
                "could not record the outcome of job %s",
                job.id,
                exc_info=failed,
                extra=for_job(job.id),
            )
            continue
        settled.append(job.id)
        log.info("job %s %s", job.id, outcome.state, extra=for_job(job.id))
        if on_run_end is not None:
            try:
                on_run_end(job, outcome, seconds)
            except Exception:
                log.exception("the run-end hook failed for job %s", job.id)
    for job_id in settled:
        try:
            await executor.release(job_id)
        except Exception:
            log.warning("could not release the run of job %s", job_id, exc_info=True)
    return ended


async def fail_beside(store: JobStore, runs: Iterable[Run], culprit: str, error: JobError) -> None:
    """`culprit` hit a sticky CUDA error (`error`): stop every other run of this process and
    fail it as `cuda_fatal`, since its own outcome will not be recorded."""
    collateral = JobError(
        ErrorCode.CUDA_FATAL,
        f"the CUDA context of the server failed while this job ran (job {culprit}: "
        f"{error.message})",
    )
    own = asyncio.current_task()
    for run in list(runs):
        if run.job_id == culprit or run.task is None or run.task is own or not run.lanes:
            continue  # its batch companions have the culprit's error as their own
        run.cancel.set()
        run.task.cancel()
        with contextlib.suppress(JobAlreadyFinished):
            await store.finish(run.job_id, Outcome(JobState.FAILED, collateral), utcnow())
