"""What the API can do with jobs: the rules of submission and cancel, over the store and the
dispatcher. Knows nothing of HTTP."""

from __future__ import annotations

import math
from statistics import fmean
from typing import Protocol

import anyio.to_thread

from yolo_orch.clock import utcnow
from yolo_orch.dispatcher import Dispatcher
from yolo_orch.domain import Job, JobFilter, JobState, NewJob, Page
from yolo_orch.errors import (
    InvalidJob,
    ModelNotFound,
    QueueFull,
    ResultNotReady,
    ShuttingDown,
)
from yolo_orch.jobfiles import JobFiles
from yolo_orch.store.base import JobStore


class ModelCatalog(Protocol):
    def has_model(self, model: str) -> bool: ...


class JobService:
    def __init__(
        self,
        store: JobStore,
        dispatcher: Dispatcher,
        models: ModelCatalog,
        files: JobFiles,
        *,
        lane_count: int,
        total_slots: int,
        max_queued: int,
    ) -> None:
        self._store = store
        self._dispatcher = dispatcher
        self._models = models
        self._files = files
        self._lane_count = lane_count
        self._total_slots = total_slots
        self._max_queued = max_queued
        self.draining = False

    async def submit(self, new: NewJob) -> tuple[Job, bool]:
        """Store a queued job (committed before this returns) and wake the dispatcher.

        Returns the job and whether it is new (`False`: an earlier request with the same
        idempotency key made it).
        """
        if self.draining:
            raise ShuttingDown()
        if new.gpus > self._lane_count:
            raise InvalidJob(
                f"the job asks for {new.gpus} GPUs; this host has {self._lane_count} lane(s)",
                code="too_many_gpus",
            )
        if not self._models.has_model(new.model):
            raise ModelNotFound(new.model)
        try:
            job, created = await self._store.create(new, max_queued=self._max_queued, now=utcnow())
        except QueueFull:
            raise QueueFull(self._max_queued, await self._retry_after_s()) from None
        if created:
            self._dispatcher.wake()
        return job, created

    async def get(self, job_id: str) -> Job:
        return await self._store.get(job_id)

    async def list_jobs(self, where: JobFilter, *, limit: int, before_seq: int | None) -> Page:
        return await self._store.list_jobs(where, limit=limit, before_seq=before_seq)

    async def cancel(self, job_id: str) -> Job:
        job = await self._store.cancel(job_id, utcnow())
        if job.state is JobState.RUNNING:
            self._dispatcher.request_cancel(job_id)
        else:
            self._dispatcher.wake()
        return job

    async def result(self, job_id: str) -> bytes:
        job = await self._store.get(job_id)
        if job.state is not JobState.SUCCEEDED:
            raise ResultNotReady(job_id, job.state)
        return await anyio.to_thread.run_sync(self._files.read_result, job_id)

    async def _retry_after_s(self) -> int:
        """A queue place opens each time a job starts: about one mean run time per slot."""
        durations = await self._store.recent_durations(20)
        mean = fmean(durations) if durations else 1.0
        return max(1, min(3600, math.ceil(mean / self._total_slots)))
