"""Takes queued jobs in order, admits them onto lanes, runs them through the executor and records
how each run ended. The only writer of RUNNING and of run outcomes."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
import anyio.to_thread

from yolo_orch.admission import Lane, Lanes
from yolo_orch.clock import utcnow
from yolo_orch.domain import ErrorCode, Job, JobError, JobState, Outcome, Progress, QueueOrder
from yolo_orch.errors import JobAlreadyFinished, JobCancelled, RunLost, YoloOrchError
from yolo_orch.executor import Executor
from yolo_orch.jobfiles import JobFiles
from yolo_orch.logs import current_job
from yolo_orch.run_limits import RunLimits
from yolo_orch.runners.base import RunContext
from yolo_orch.store.base import JobStore

log = logging.getLogger(__name__)


@dataclass
class _Run:
    job_id: str
    cancel: threading.Event = field(default_factory=threading.Event)
    task: asyncio.Task[None] | None = None
    progress: Progress | None = None
    progress_writer: asyncio.Task[None] | None = None
    lanes: tuple[Lane, ...] = ()
    timeout_s: float = 0.0
    started: float = 0.0
    moved: float = 0.0
    """Loop time of the last progress that changed anything (or of the start)."""
    stopped_by: JobError | None = None
    """Why the watchdog told the run to stop: its outcome is this failure, whatever it returns."""
    stopped_at: float = 0.0


class Dispatcher:
    def __init__(
        self,
        store: JobStore,
        lanes: Lanes,
        executor: Executor,
        files: JobFiles,
        *,
        progress_interval_s: float = 0.25,
        retry_delay_s: float = 1.0,
        limits: RunLimits | None = None,
        priority_aging_per_minute: float = 0.0,
        on_run_end: Callable[[Job, Outcome, float], None] | None = None,
    ) -> None:
        self._store = store
        self._lanes = lanes
        self._executor = executor
        self._files = files
        self._progress_interval_s = progress_interval_s
        self._retry_delay_s = retry_delay_s
        self._on_run_end = on_run_end
        self._limits = limits or RunLimits()
        self._aging_per_minute = priority_aging_per_minute
        self._wakeup = asyncio.Event()
        self._runs: dict[str, _Run] = {}
        self._stopping = False
        self._admitting = asyncio.Lock()
        self._suspects: set[str] = set()
        """Jobs that were running when the server last died (not those a drain left behind):
        each runs alone once, so a job that kills the server takes no innocent neighbour's
        attempts with it."""
        self.abandoned = 0
        """Runs left behind by `drain`; their worker threads may still be going."""
        self.fatal = asyncio.Event()
        """Set once a sticky CUDA error has poisoned this process: the server must exit (and
        systemd restart it) for CUDA to work again."""
        self.wedged = asyncio.Event()
        """Set once a run's thread ignored a stop past the grace period and every other run has
        ended: the server must exit (and systemd restart it) to get its lanes back."""
        self._wedged_runs = 0

    @property
    def running_jobs(self) -> list[str]:
        return list(self._runs)

    async def recover(self) -> list[Job]:
        """Settle the jobs a previous process left RUNNING; call before `run`."""
        # Read before the recovery: a drained job gets its attempt back.
        drained = await anyio.to_thread.run_sync(self._files.take_abandoned)
        changed = await self._store.recover(utcnow(), frozenset(drained))
        for job in changed:
            log.warning("recovered job %s after a stop: now %s", job.id, job.state)
        self._suspects = {
            job.id for job in changed if job.state is JobState.QUEUED and job.id not in drained
        }
        return changed

    def wake(self) -> None:
        self._wakeup.set()

    def request_cancel(self, job_id: str) -> None:
        run = self._runs.get(job_id)
        if run is not None:
            run.cancel.set()

    async def run(self) -> None:
        """Admit jobs whenever something changes, until `drain` is called; meanwhile watch the
        running jobs' time limits and progress."""
        watchdog = asyncio.create_task(self._watch(), name="job-watchdog")
        try:
            await self._admit_until_stopped()
        finally:
            watchdog.cancel()

    async def _admit_until_stopped(self) -> None:
        while not self._stopping:
            self._wakeup.clear()
            try:
                async with self._admitting:
                    await self._admit_waiting()
            except Exception:
                log.exception("admission pass failed; retrying")
                await asyncio.sleep(self._retry_delay_s)
                self.wake()
            await self._wakeup.wait()

    async def drain(self, grace_s: float) -> None:
        """Admit nothing more; give running jobs `grace_s` to finish, then abandon the rest.

        Abandoned jobs stay RUNNING in the store, so recovery requeues them on the next start.
        """
        self._stopping = True
        self.wake()
        async with self._admitting:  # let a pass that is starting a job finish starting it
            runs = {run.task: run for run in self._runs.values() if run.task is not None}
        if not runs:
            return
        _, pending = await asyncio.wait(runs, timeout=grace_s)
        for task in pending:
            runs[task].cancel.set()  # cooperative runners stop soon; the outcome is not recorded
            task.cancel()
        if pending:  # a graceful stop, not a crash: these need not run alone at the next start
            abandoned = [runs[task].job_id for task in pending]
            await anyio.to_thread.run_sync(self._files.note_abandoned, abandoned)
        await asyncio.gather(*pending, return_exceptions=True)
        self.abandoned += len(pending)
        if pending:
            log.warning("left %d running job(s) for recovery at the next start", len(pending))

    async def _admit_waiting(self) -> None:
        started = True
        while started and not self._stopping and not self._wedged_runs and self._lanes.free_slots:
            started = False
            window = 2 * self._lanes.total_slots + len(self._lanes)
            reserved: set[str] = set()
            # Jobs needing more lanes than can take work are not even read: they would fill
            # the window and hide the runnable jobs behind them.
            order = QueueOrder(utcnow(), self._aging_per_minute, self._lanes.healthy_count)
            for job in await self._store.next_queued(window, order):
                if self._stopping or self._suspects & self._runs.keys():
                    return
                if len(reserved) == len(self._lanes) or self._lanes.free_slots == 0:
                    return
                if job.id in self._suspects and self._runs:
                    return  # it waits for the lanes to empty, and nothing behind it starts
                lanes = await self._lanes.try_admit(job.id, job.gpus, reserved)
                if lanes is None:
                    reserved |= self._lanes.lanes_to_hold(job.gpus, reserved)
                    continue
                started |= await self._start(job, lanes)

    async def _start(self, job: Job, lanes: tuple[Lane, ...]) -> bool:
        run = _Run(job.id)
        self._runs[job.id] = run  # before the claim, so a cancel that races it finds the run
        try:
            claimed = await self._store.claim(job.id, tuple(lane.id for lane in lanes), utcnow())
        except BaseException:
            self._forget(run, lanes)
            raise
        if claimed is None:  # cancelled while we admitted it
            self._forget(run, lanes)
            return False
        run.lanes = lanes
        run.timeout_s = self._limits.timeout_for(claimed)
        run.started = run.moved = asyncio.get_running_loop().time()
        run.task = asyncio.create_task(self._run_job(claimed, lanes, run), name=f"job {job.id}")
        return True

    def _forget(self, run: _Run, lanes: tuple[Lane, ...]) -> None:
        self._runs.pop(run.job_id, None)
        self._suspects.discard(run.job_id)
        self._lanes.release(run.job_id, lanes)
        self.wake()

    async def _run_job(self, job: Job, lanes: tuple[Lane, ...], run: _Run) -> None:
        loop = asyncio.get_running_loop()

        def report_progress(progress: Progress) -> None:  # called from the worker thread
            # The loop is gone once a run was abandoned at shutdown.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._note_progress, run, progress)

        workdir = self._files.workdir(job.id)
        ctx = RunContext(
            job=job,
            devices=tuple(lane.id for lane in lanes),
            workdir=workdir,
            report_progress=report_progress,
            should_cancel=run.cancel.is_set,
        )
        started = loop.time()
        current_job.set(job.id)  # this task's context, inherited by the worker thread
        log.info("job %s started on %s (attempt %d)", job.id, ", ".join(ctx.devices), job.attempt)
        try:
            try:
                outcome = await self._execute(ctx)
            except RunLost as lost:
                log.warning("job %s: %s; back to the queue", job.id, lost.message)
                with contextlib.suppress(JobAlreadyFinished):
                    await self._store.requeue(job.id, utcnow())
                return
            await self._record(job.id, outcome)
            log.info("job %s %s", job.id, outcome.state)
            if outcome.error is not None and outcome.error.code == ErrorCode.CUDA_FATAL:
                await self._poisoned(job.id, outcome.error)
            if self._on_run_end is not None:
                try:
                    self._on_run_end(job, outcome, loop.time() - started)
                except Exception:
                    log.exception("the run-end hook failed for job %s", job.id)
        except asyncio.CancelledError:
            raise  # abandoned at shutdown: the job stays RUNNING for recovery
        except Exception:
            log.exception("could not record the outcome of job %s", job.id)
        finally:
            if run.progress_writer is not None:
                run.progress_writer.cancel()
            self._forget(run, lanes)

    async def _watch(self) -> None:
        """The watchdog: a job past its time limit, or whose progress stands still, is told to
        stop as a cancel would; one whose thread ignores that past the grace period is failed
        here and its lanes wedged."""
        while True:
            await asyncio.sleep(self._limits.check_interval_s)
            try:
                await self._check_runs(asyncio.get_running_loop().time())
            except Exception:  # the store failed to record a wedged job: the next round retries
                log.exception("the watchdog's round failed")

    async def _check_runs(self, now: float) -> None:
        for run in list(self._runs.values()):
            if run.task is None or run.task.done() or run.task.cancelling():
                continue  # not started yet, ended, or abandoned
            if run.stopped_by is None:
                breach = self._limits.breach(run.timeout_s, now - run.started, now - run.moved)
                if breach is not None:
                    log.warning("job %s: %s; stopping it", run.job_id, breach.message)
                    run.stopped_by, run.stopped_at = breach, now
                    run.cancel.set()
            elif now - run.stopped_at >= self._limits.wedge_grace_s:
                await self._wedge(run, run.stopped_by, run.task)
        if self._wedged_runs and not self._runs:
            self.wedged.set()

    async def _wedge(self, run: _Run, error: JobError, task: asyncio.Task[None]) -> None:
        """Record the run's failure, abandon its thread (it cannot be killed), keep its lanes
        out of admission and admit nothing more: once the other runs end, the server exits."""
        with contextlib.suppress(JobAlreadyFinished):
            outcome = Outcome(JobState.FAILED, error, progress=run.progress)
            await self._store.finish(run.job_id, outcome, utcnow())
        lanes = ", ".join(lane.id for lane in run.lanes)
        log.critical(
            "job %s did not stop within %gs: lanes %s are wedged; the server restarts once "
            "the other jobs end",
            run.job_id,
            self._limits.wedge_grace_s,
            lanes,
        )
        for lane in run.lanes:
            lane.wedged = True
        self._wedged_runs += 1
        self.wake()
        task.cancel()  # abandons the thread; its outcome, recorded here, stays

    async def _poisoned(self, culprit: str, error: JobError) -> None:
        """Admit nothing more, fail the other jobs running in this CUDA context, and say the
        process must end; queued jobs wait for the next start."""
        log.critical("job %s hit a fatal CUDA error; the server must restart", culprit)
        self._stopping = True
        self.wake()
        collateral = JobError(
            ErrorCode.CUDA_FATAL,
            f"the CUDA context of the server failed while this job ran (job {culprit}: "
            f"{error.message})",
        )
        for run in list(self._runs.values()):
            if run.job_id == culprit or run.task is None:
                continue
            run.cancel.set()
            run.task.cancel()  # its own outcome is not recorded: this one is
            with contextlib.suppress(JobAlreadyFinished):
                await self._store.finish(run.job_id, Outcome(JobState.FAILED, collateral), utcnow())
        self.fatal.set()

    async def _record(self, job_id: str, outcome: Outcome) -> None:
        """The outcome, retried for a while: a job whose end is not recorded would read as
        running until the next restart."""
        for delay in (0.5, 2.0, 5.0, None):
            try:
                await self._store.finish(job_id, outcome, utcnow())
                return
            except JobAlreadyFinished:
                return
            except Exception:
                if delay is None:
                    raise
                log.warning("recording job %s failed; retrying in %ss", job_id, delay)
                await asyncio.sleep(delay)

    async def _execute(self, ctx: RunContext) -> Outcome:
        try:
            await anyio.Path(ctx.workdir).mkdir(parents=True, exist_ok=True)
            result = await self._executor.run(ctx)
            await anyio.to_thread.run_sync(self._files.write_result, ctx.job.id, result.detail)
        except RunLost:
            raise
        except JobCancelled:
            run = self._runs[ctx.job.id]
            if run.stopped_by is not None:
                return Outcome(JobState.FAILED, error=run.stopped_by, progress=run.progress)
            return Outcome(JobState.CANCELLED, progress=run.progress)
        except Exception as exc:
            error = self._runs[ctx.job.id].stopped_by or failure_of(exc)
            log.warning("job %s failed: %s: %s", ctx.job.id, error.code, error.message)
            return Outcome(JobState.FAILED, error=error, progress=self._runs[ctx.job.id].progress)
        run = self._runs[ctx.job.id]
        if run.stopped_by is not None:  # it ignored the stop, but not for long
            return Outcome(JobState.FAILED, error=run.stopped_by, progress=run.progress)
        return Outcome(JobState.SUCCEEDED, result=result.summary, progress=run.progress)

    def _note_progress(self, run: _Run, progress: Progress) -> None:
        if self._runs.get(run.job_id) is not run:
            return  # reported after the run ended (or was abandoned)
        if progress != run.progress:
            run.moved = asyncio.get_running_loop().time()
        run.progress = progress
        if run.progress_writer is None or run.progress_writer.done():
            run.progress_writer = asyncio.create_task(self._write_progress(run))

    async def _write_progress(self, run: _Run) -> None:
        """Write the newest progress, at most once per interval, so a runner that reports every
        batch does not turn into one database write per batch."""
        written = None
        while run.progress is not None and run.progress != written:
            written = run.progress
            try:
                await self._store.set_progress(run.job_id, written)
            except Exception:  # progress is advisory: the outcome is what must be recorded
                log.warning("could not record the progress of job %s", run.job_id, exc_info=True)
            await asyncio.sleep(self._progress_interval_s)


_STICKY_CUDA_ERRORS = (
    "illegal memory access",
    "device-side assert",
    "unspecified launch failure",
    "misaligned address",
    "illegal instruction",
    "uncorrectable ECC error",
    "CUDA error: unknown error",
)
"""CUDA errors after which the process's CUDA context is unusable until the process ends."""


def failure_of(exc: BaseException) -> JobError:
    """Classify what a runner raised by what torch says: CUDA OOM is a RuntimeError saying "out
    of memory"; sticky CUDA errors name their cause. The simulated runtime raises the same."""
    if isinstance(exc, YoloOrchError):
        return JobError(exc.code, exc.message)
    if _disk_full(exc):
        return JobError(ErrorCode.DISK_FULL, f"no space left on the device: {exc}")
    if isinstance(exc, RuntimeError) and any(sign in str(exc) for sign in _STICKY_CUDA_ERRORS):
        return JobError(ErrorCode.CUDA_FATAL, str(exc))
    if isinstance(exc, RuntimeError) and "out of memory" in str(exc):
        return JobError(ErrorCode.CUDA_OOM, str(exc))
    return JobError(ErrorCode.RUNTIME_ERROR, f"{type(exc).__name__}: {exc}")


def _disk_full(exc: BaseException | None) -> bool:
    """ENOSPC, raised directly or as the cause of what a library raised instead (torch's
    checkpoint writer, for one, says so only in its message)."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            return True
        if "No space left on device" in str(exc):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False
