"""What the dispatcher writes about a run besides its claim: its progress, at most one write per
interval, and its outcome, retried."""

from __future__ import annotations

import asyncio
import logging

from yolo_orch.clock import utcnow
from yolo_orch.domain import Outcome, Progress
from yolo_orch.errors import JobAlreadyFinished
from yolo_orch.runs import Run
from yolo_orch.store.base import JobStore

log = logging.getLogger(__name__)

_RECORD_RETRIES_S = (0.5, 2.0, 5.0)


class ProgressWriter:
    """Writes the newest progress of each run at most once per `interval_s`, so a runner that
    reports every image does not turn into one database write per image."""

    def __init__(self, store: JobStore, interval_s: float) -> None:
        self._store = store
        self._interval_s = interval_s

    def note(self, run: Run, progress: Progress) -> None:
        """On the event loop: `progress` is the run's newest."""
        if progress != run.progress:
            run.moved = asyncio.get_running_loop().time()
        run.progress = progress
        if run.progress_writer is None or run.progress_writer.done():
            run.progress_writer = asyncio.create_task(self._write(run))

    async def _write(self, run: Run) -> None:
        written = None
        # A run that ends within the first interval writes no progress: its outcome has it.
        await asyncio.sleep(self._interval_s)
        while run.progress is not None and run.progress != written:
            written = run.progress
            try:
                await self._store.set_progress(run.job_id, written)
            except Exception:  # progress is advisory: the outcome is what must be recorded
                log.warning("could not record the progress of job %s", run.job_id, exc_info=True)
            await asyncio.sleep(self._interval_s)


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
