"""The dispatcher's claims: the writes that make queued jobs RUNNING on their lanes and count their
attempts. Awaited before a run, or, where the executor allows it (`Executor.starts_unclaimed`),
written while the run starts: waiting for that commit was the largest cost a lane paid between
two short jobs (`StartJournal` says why a crash meanwhile still counts the attempt)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from datetime import datetime

from yolo_orch.dispatch.queue_head import QueueHead
from yolo_orch.domain import Job
from yolo_orch.files.start_journal import StartJournal
from yolo_orch.store.base import JobStore

log = logging.getLogger(__name__)


class Claims:
    def __init__(self, store: JobStore, starts: StartJournal, head: QueueHead) -> None:
        self._store = store
        self._starts = starts
        self._head = head
        self._in_flight = 0
        """Claims of runs that started without waiting for them."""

    async def take(
        self, jobs: Sequence[Job], devices: tuple[str, ...], now: datetime
    ) -> list[Job | None]:
        """Each job as its claim made it, or None: cancelled meanwhile (or the claim failed,
        which is logged)."""
        try:
            claims = await asyncio.gather(
                *(self._store.claim(job.id, devices, now, job.model_id) for job in jobs),
                return_exceptions=True,
            )
        finally:
            self._head.claimed({job.id for job in jobs})
        answers: list[Job | None] = []
        for job, claimed in zip(jobs, claims, strict=True):
            if isinstance(claimed, BaseException):
                log.error("could not claim job %s", job.id, exc_info=claimed)
                claimed = None
            answers.append(claimed)
        return answers

    def meanwhile(
        self,
        jobs: Sequence[Job],
        devices: tuple[str, ...],
        now: datetime,
        stops: Sequence[threading.Event],
    ) -> asyncio.Task[set[str]]:
        """Claim `jobs`, whose runs are starting, in a task that answers the ids it could not
        claim and sets their `stops`."""
        self._in_flight += 1

        async def claim() -> set[str]:
            try:
                claims = await self.take(jobs, devices, now)
            finally:
                self._in_flight -= 1
            if not self._in_flight:  # every run started so far is claimed
                self._starts.trim()
            unclaimed = set()
            for job, stop, claimed in zip(jobs, stops, claims, strict=True):
                if claimed is None:
                    stop.set()
                    unclaimed.add(job.id)
            return unclaimed

        # Created now, so that its claims are queued before anything the runs write.
        return asyncio.create_task(claim(), name=f"claim {jobs[0].id}")
