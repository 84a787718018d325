"""A complete job store in memory: for fast tests and demos (`database_url = "memory://"`).

It keeps nothing across restarts; everything else behaves as the SQLite store does, which the
shared contract tests check.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime

from yolo_orch.domain import (
    Job,
    JobFilter,
    JobState,
    NewJob,
    Outcome,
    Page,
    Progress,
    after_interruption,
)
from yolo_orch.errors import IdempotencyKeyReused, JobAlreadyFinished, JobNotFound, QueueFull
from yolo_orch.store.base import JobStore


class InMemoryJobStore(JobStore):
    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._by_key: dict[str, str] = {}
        self._seq = 0

    # Inspection helpers for tests.
    @property
    def jobs(self) -> list[Job]:
        return sorted(self._jobs.values(), key=lambda job: job.seq)

    async def create(self, new: NewJob, *, max_queued: int, now: datetime) -> tuple[Job, bool]:
        if new.idempotency_key is not None and new.idempotency_key in self._by_key:
            existing = self._jobs[self._by_key[new.idempotency_key]]
            if existing.request_fingerprint != new.request_fingerprint:
                raise IdempotencyKeyReused(new.idempotency_key, existing.id)
            return existing, False
        if await self.count_queued() >= max_queued:
            raise QueueFull(max_queued)
        self._seq += 1
        job = Job(
            id=str(uuid.uuid4()),
            seq=self._seq,
            kind=new.kind,
            state=JobState.QUEUED,
            model=new.model,
            spec=new.spec,
            priority=new.priority,
            gpus=new.gpus,
            attempt=0,
            max_attempts=new.max_attempts,
            created_at=now,
            idempotency_key=new.idempotency_key,
            request_fingerprint=new.request_fingerprint,
        )
        self._jobs[job.id] = job
        if new.idempotency_key is not None:
            self._by_key[new.idempotency_key] = job.id
        return job, True

    async def get(self, job_id: str) -> Job:
        try:
            return self._jobs[job_id]
        except KeyError:
            raise JobNotFound(job_id) from None

    async def list_jobs(self, where: JobFilter, *, limit: int, before_seq: int | None) -> Page:
        matching = [
            job
            for job in sorted(self._jobs.values(), key=lambda job: job.seq, reverse=True)
            if (not where.states or job.state in where.states)
            and (not where.kinds or job.kind in where.kinds)
            and (before_seq is None or job.seq < before_seq)
        ]
        page = matching[:limit]
        more = len(matching) > limit
        return Page(jobs=page, next_cursor=page[-1].seq if more and page else None)

    async def next_queued(self, limit: int) -> list[Job]:
        queued = [job for job in self._jobs.values() if job.state is JobState.QUEUED]
        queued.sort(key=lambda job: (-job.priority, job.seq))
        return queued[:limit]

    async def count_queued(self) -> int:
        return sum(job.state is JobState.QUEUED for job in self._jobs.values())

    async def claim(self, job_id: str, devices: tuple[str, ...], now: datetime) -> Job | None:
        job = await self.get(job_id)
        if job.state is not JobState.QUEUED:
            return None
        return self._put(
            replace(
                job,
                state=JobState.RUNNING,
                devices=devices,
                attempt=job.attempt + 1,
                started_at=now,
                progress=None,
            )
        )

    async def set_progress(self, job_id: str, progress: Progress) -> None:
        job = await self.get(job_id)
        if job.state is JobState.RUNNING:
            self._put(replace(job, progress=progress))

    async def finish(self, job_id: str, outcome: Outcome, now: datetime) -> Job:
        job = await self.get(job_id)
        if job.state.is_terminal:
            raise JobAlreadyFinished(job_id, job.state)
        return self._put(
            replace(
                job,
                state=outcome.state,
                error=outcome.error,
                result=outcome.result,
                progress=outcome.progress or job.progress,
                finished_at=now,
            )
        )

    async def cancel(self, job_id: str, now: datetime) -> Job:
        job = await self.get(job_id)
        if job.state.is_terminal:
            raise JobAlreadyFinished(job_id, job.state)
        if job.state is JobState.QUEUED:
            return self._put(
                replace(job, state=JobState.CANCELLED, cancel_requested=True, finished_at=now)
            )
        return self._put(replace(job, cancel_requested=True))

    async def recover(self, now: datetime) -> list[Job]:
        changed = []
        for job in self.jobs:
            if job.state is not JobState.RUNNING:
                continue
            state, error = after_interruption(job)
            if state is JobState.QUEUED:
                job = replace(job, state=state, devices=(), progress=None, started_at=None)
            else:
                job = replace(job, state=state, error=error, finished_at=now)
            changed.append(self._put(job))
        return changed

    async def recent_durations(self, limit: int) -> list[float]:
        finished = [
            job
            for job in self._jobs.values()
            if job.finished_at is not None and job.started_at is not None
        ]
        finished.sort(key=lambda job: job.finished_at or job.created_at, reverse=True)
        return [
            (job.finished_at - job.started_at).total_seconds()
            for job in finished[:limit]
            if job.finished_at and job.started_at
        ]

    def _put(self, job: Job) -> Job:
        self._jobs[job.id] = job
        return job
