"""The watchdog over running jobs: a job past its time limit, or whose progress stands still, is
told to stop as a cancel would; one whose thread ignores that past the grace period is failed
here and its lanes wedged."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from yolo_orch.dispatch.run_limits import RunLimits
from yolo_orch.dispatch.runs import Run
from yolo_orch.domain import JobError, JobState, Outcome
from yolo_orch.errors import JobAlreadyFinished
from yolo_orch.ops.clock import utcnow
from yolo_orch.ops.logs import for_job
from yolo_orch.store.base import JobStore

log = logging.getLogger(__name__)


class Watchdog:
    def __init__(
        self, store: JobStore, limits: RunLimits, runs: dict[str, Run], wake: Callable[[], None]
    ) -> None:
        """`runs`: the dispatcher's own, read live; `wake`: the dispatcher's wake-up."""
        self._store = store
        self._limits = limits
        self._runs = runs
        self._wake = wake
        self.wedged_runs = 0
        self.wedged = asyncio.Event()
        """Set once a wedged run's thread is left alone with no other run going."""

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self._limits.check_interval_s)
            try:
                await self.check(asyncio.get_running_loop().time())
            except Exception:  # the store failed to record a wedged job: the next round retries
                log.exception("the watchdog's round failed")

    async def check(self, now: float) -> None:
        for run in list(self._runs.values()):
            if not run.lanes or run.task is None or run.task.done() or run.task.cancelling():
                continue  # not claimed yet, ended, or abandoned
            if run.stopped_by is None:
                breach = self._limits.breach(run.timeout_s, now - run.started, now - run.moved)
                if breach is not None:
                    log.warning(
                        "job %s: %s; stopping it",
                        run.job_id,
                        breach.message,
                        extra=for_job(run.job_id),
                    )
                    run.stopped_by, run.stopped_at = breach, now
                    run.cancel.set()
            elif now - run.stopped_at >= self._limits.wedge_grace_s:
                await self._wedge(run, run.stopped_by, run.task)
        if self.wedged_runs and not self._runs:
            self.wedged.set()

    async def _wedge(self, run: Run, error: JobError, task: asyncio.Task[None]) -> None:
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
            extra=for_job(run.job_id),
        )
        for lane in run.lanes:
            lane.wedged = True
        self.wedged_runs += 1
        self._wake()
        task.cancel()  # abandons the thread; its outcome, recorded here, stays
