"""Complete job and model stores in memory: for fast tests and demos
(`database_url = "memory://"`). The model store is in `memory_models.py`.

They keep nothing across restarts; everything else behaves as the SQL stores do, which the
shared contract tests check. No method awaits between its reads and its writes, so each runs
whole on the event loop: that is this store's transaction.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from yolo_orch.domain import (
    Job,
    JobFilter,
    JobKind,
    JobState,
    Model,
    NewJob,
    Outcome,
    Page,
    Progress,
    QueueOrder,
    after_interruption,
    claimed,
)
from yolo_orch.domain.variants import Variant
from yolo_orch.domain.webhooks import WebhookEvent
from yolo_orch.errors import (
    IdempotencyKeyReused,
    JobActive,
    JobAlreadyFinished,
    JobNotFound,
    ModelNotFound,
    QueueFull,
)
from yolo_orch.store.base import JobStore
from yolo_orch.store.memory_deps import Waits, pending_dependencies, release_dependents
from yolo_orch.store.outbox import NO_OUTBOX, Outbox


@dataclass
class InMemoryDatabase:
    """What the two in-memory stores share, as the SQL stores share one database: each
    checks the other's records (a job's model, a model's jobs)."""

    jobs: dict[str, Job] = field(default_factory=dict)
    job_ids_by_key: dict[str, str] = field(default_factory=dict)
    kept_results: dict[str, bytes] = field(default_factory=dict)
    """Job id -> the full result recorded with its outcome (`Outcome.kept_result`)."""
    last_seq: int = 0
    models: dict[str, Model] = field(default_factory=dict)
    """By id, in registration order."""
    variants: dict[str, Variant] = field(default_factory=dict)
    """By id, in registration order."""
    waits: Waits = field(default_factory=dict)
    """Queued job id -> the jobs it waits for (`NewJob.after`), with their `ok_only`."""

    def active_job_ids(self, model_id: str) -> list[str]:
        """Queued or running jobs that use the model, in submission order."""
        return [
            job.id
            for job in sorted(self.jobs.values(), key=lambda job: job.seq)
            if job.model_id == model_id and not job.state.is_terminal
        ]


class InMemoryJobStore(JobStore):
    def __init__(self, db: InMemoryDatabase | None = None, outbox: Outbox = NO_OUTBOX) -> None:
        self._db = db if db is not None else InMemoryDatabase()
        self._jobs = self._db.jobs
        self._by_key = self._db.job_ids_by_key
        self._outbox = outbox
        self._released: list[Job] = []

    # Inspection helpers for tests.
    @property
    def jobs(self) -> list[Job]:
        return sorted(self._jobs.values(), key=lambda job: job.seq)

    async def create(self, new: NewJob, *, max_queued: int, now: datetime) -> tuple[Job, bool]:
        job, created = self._create(new, max_queued, now)
        self._notify(created)
        return job, created

    async def create_chain(
        self, chain: list[NewJob], *, max_queued: int, now: datetime
    ) -> list[Job]:
        if await self.count_queued() + len(chain) > max_queued:
            raise QueueFull(max_queued)
        jobs = []
        for new in chain:
            job, created = self._create(new, max_queued, now)
            if not created:
                return [job]
            jobs.append(job)
        self._notify(True)
        return jobs

    def _notify(self, recorded: bool) -> None:
        if recorded and self._outbox.active:
            self._outbox.committed()

    def released(self) -> list[Job]:
        taken, self._released = self._released, []
        return taken

    def _create(self, new: NewJob, max_queued: int, now: datetime) -> tuple[Job, bool]:
        if new.idempotency_key is not None and new.idempotency_key in self._by_key:
            existing = self._jobs[self._by_key[new.idempotency_key]]
            if existing.request_fingerprint != new.request_fingerprint:
                raise IdempotencyKeyReused(new.idempotency_key, existing.id)
            return existing, False
        if new.unique_key is not None and (same := self._unique_match(new, now)) is not None:
            return same, False
        pending = pending_dependencies(new, self._jobs)
        if new.model_id is not None:
            model = self._db.models.get(new.model_id)
            if model is None or not model.usable:
                raise ModelNotFound(new.model_id)
        if sum(job.state is JobState.QUEUED for job in self._jobs.values()) >= max_queued:
            raise QueueFull(max_queued)
        self._db.last_seq += 1
        job = Job(
            id=new.id,
            seq=self._db.last_seq,
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
            model_id=new.model_id,
            parent_id=new.parent_id,
            chain_id=new.chain_id,
            unique_key=new.unique_key,
            webhook=new.webhook,
            blocked=bool(pending),
        )
        self._jobs[job.id] = job
        if pending:
            self._db.waits[job.id] = pending
        if new.idempotency_key is not None:
            self._by_key[new.idempotency_key] = job.id
        self._outbox.record(None, job, WebhookEvent.QUEUED, now)
        return job, True

    def _unique_match(self, new: NewJob, now: datetime) -> Job | None:
        since = now - timedelta(seconds=new.unique_for_s)
        return next(
            (
                job
                for job in self.jobs
                if job.unique_key == new.unique_key
                and not job.state.is_terminal
                and job.created_at >= since
            ),
            None,
        )

    async def get(self, job_id: str) -> Job:
        try:
            return self._jobs[job_id]
        except KeyError:
            raise JobNotFound(job_id) from None

    async def list_jobs(self, where: JobFilter, *, limit: int, before_seq: int | None) -> Page:
        matching = [
            job
            for job in sorted(self._jobs.values(), key=lambda job: job.seq, reverse=True)
            if where.matches(job) and (before_seq is None or job.seq < before_seq)
        ]
        page = matching[:limit]
        more = len(matching) > limit
        return Page(jobs=page, next_cursor=page[-1].seq if more and page else None)

    async def next_queued(self, limit: int, order: QueueOrder | None = None) -> list[Job]:
        queued = [
            job for job in self._jobs.values() if job.state is JobState.QUEUED and not job.blocked
        ]
        if order is not None:
            return order.sort([job for job in queued if order.admits(job)])[:limit]
        queued.sort(key=lambda job: (-job.priority, job.seq))
        return queued[:limit]

    async def count_queued(self, kind: JobKind | None = None) -> int:
        return sum(
            job.state is JobState.QUEUED and kind in (None, job.kind) for job in self._jobs.values()
        )

    async def counts(self) -> dict[tuple[str, str], int]:
        return dict(Counter((str(job.state), str(job.kind)) for job in self._jobs.values()))

    async def claim(
        self, job_id: str, devices: tuple[str, ...], now: datetime, model_id: str | None = None
    ) -> Job | None:
        job = await self.get(job_id)
        if job.state is not JobState.QUEUED:
            return None
        if model_id is not None:
            job = replace(job, model_id=model_id)
        started = self._put(claimed(job, devices, now))
        self._notify(self._outbox.record(None, started, WebhookEvent.STARTED, now))
        return started

    async def set_progress(self, job_id: str, progress: Progress) -> None:
        job = await self.get(job_id)
        if job.state is JobState.RUNNING:
            job = self._put(replace(job, progress=progress))
            self._notify(self._outbox.record(None, job, WebhookEvent.PROGRESS, datetime.now(UTC)))

    async def switch_model(self, job_id: str, model_id: str) -> None:
        job = await self.get(job_id)
        if job.state is JobState.RUNNING:
            self._put(replace(job, model_id=model_id))

    async def finish(self, job_id: str, outcome: Outcome, now: datetime) -> Job:
        job = await self.get(job_id)
        if job.state.is_terminal:
            raise JobAlreadyFinished(job_id, job.state)
        if outcome.kept_result is not None:
            self._db.kept_results[job_id] = outcome.kept_result
        job = self._put(
            replace(
                job,
                state=outcome.state,
                error=outcome.error,
                result=outcome.result,
                progress=outcome.progress or job.progress,
                finished_at=now,
            )
        )
        self._settled(job, now)
        return job

    def _settled(self, job: Job, now: datetime) -> None:
        """A job left RUNNING or QUEUED: its event; the jobs waiting for it, if it ended."""
        event = WebhookEvent(str(job.state))
        recorded = self._outbox.record(None, job, event, now)
        if job.state.is_terminal:
            self._db.waits.pop(job.id, None)
            waits, jobs, put = self._db.waits, self._jobs, self._put
            release_dependents(job, now, waits, jobs, put, self._outbox, self._released)
        self._notify(recorded or self._outbox.active)

    async def kept_result(self, job_id: str) -> bytes | None:
        return self._db.kept_results.get(job_id)

    async def cancel(self, job_id: str, now: datetime) -> Job:
        job = await self.get(job_id)
        if job.state.is_terminal:
            raise JobAlreadyFinished(job_id, job.state)
        if job.state is JobState.QUEUED:
            cancelled = self._put(
                replace(
                    job,
                    state=JobState.CANCELLED,
                    cancel_requested=True,
                    finished_at=now,
                    blocked=False,
                )
            )
            self._settled(cancelled, now)
            return cancelled
        return self._put(replace(job, cancel_requested=True))

    async def recover(
        self,
        now: datetime,
        drained: frozenset[str] = frozenset(),
        spared: frozenset[str] = frozenset(),
    ) -> list[Job]:
        changed = [
            self._put(_interrupted(job, now, drained=job.id in drained))
            for job in self.jobs
            if job.state is JobState.RUNNING and job.id not in spared
        ]
        for job in changed:
            self._settled(job, now)
        return changed

    async def requeue(self, job_id: str, now: datetime) -> Job:
        job = await self.get(job_id)
        if job.state.is_terminal:
            raise JobAlreadyFinished(job_id, job.state)
        requeued = self._put(_interrupted(job, now, drained=False))
        self._settled(requeued, now)
        return requeued

    async def recent_durations(self, limit: int, kind: JobKind | None = None) -> list[float]:
        finished = [
            job
            for job in self._jobs.values()
            if job.finished_at is not None
            and job.started_at is not None
            and kind in (None, job.kind)
        ]
        finished.sort(key=lambda job: job.finished_at or job.created_at, reverse=True)
        return [
            (job.finished_at - job.started_at).total_seconds()
            for job in finished[:limit]
            if job.finished_at and job.started_at
        ]

    async def delete(self, job_id: str) -> Job:
        job = await self.get(job_id)
        if not job.state.is_terminal:
            raise JobActive(job_id, job.state)
        return self._forget(job)

    async def expire(
        self, *, finished_before: datetime | None, keep: int | None, limit: int
    ) -> list[Job]:
        finished = sorted(
            (job for job in self._jobs.values() if job.state.is_terminal and job.finished_at),
            key=lambda job: (job.finished_at, job.seq),
        )
        excess = 0 if keep is None else max(0, len(finished) - keep)
        expired = [
            job
            for index, job in enumerate(finished[:limit])
            if index < excess
            or (
                finished_before is not None
                and job.finished_at is not None
                and job.finished_at < finished_before
            )
        ]
        return [self._forget(job) for job in expired]

    async def unknown(self, job_ids: list[str]) -> set[str]:
        return {job_id for job_id in job_ids if job_id not in self._jobs}

    def _put(self, job: Job) -> Job:
        self._jobs[job.id] = job
        return job

    def _forget(self, job: Job) -> Job:
        del self._jobs[job.id]
        self._db.kept_results.pop(job.id, None)
        if job.idempotency_key is not None:
            self._by_key.pop(job.idempotency_key, None)
        return job


def _interrupted(job: Job, now: datetime, *, drained: bool) -> Job:
    state, error = after_interruption(job, drained=drained)
    if state is JobState.QUEUED:
        attempt = job.attempt - 1 if drained else job.attempt
        return replace(
            job, state=state, attempt=attempt, devices=(), progress=None, started_at=None
        )
    return replace(job, state=state, error=error, finished_at=now)
