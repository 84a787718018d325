"""Job change notifications for the clients that follow a job (server-sent events).

The store stays the source of truth: a notification says "job X changed", with an event id
that grows with every change, and, for those waiting on the job, the job as the change left it
when the store returned it (claim, finish, cancel...; not after a progress write), so that a
waiter need not read it again. Ids start from the clock at process start, so a client that
reconnects after a restart never mistakes an old id for a current one.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from yolo_orch.domain import Job, JobFilter, JobKind, NewJob, Outcome, Page, Progress, QueueOrder
from yolo_orch.store.base import JobStore


@dataclass(frozen=True)
class Change:
    """A job's change, as those waiting on the job hear of it."""

    version: int
    job: Job | None
    """The job as this change left it; None when not known (read it)."""
    progress_only: bool = False
    """Only its progress changed: its state is as before."""


class _Waiting(asyncio.Event):
    """Set at a job's next change, which it then holds."""

    change: Change | None = None


class JobEvents:
    def __init__(self, remembered_jobs: int = 100_000, logged_changes: int = 10_000) -> None:
        self._counter = int(time.time() * 1000)
        self._versions: OrderedDict[str, int] = OrderedDict()
        """Latest event id per job, for the most recently changed jobs only: a job forgotten
        here just gets its current state sent again, which is always correct."""
        self._remembered = remembered_jobs
        self._changed: defaultdict[str, _Waiting] = defaultdict(_Waiting)
        self._log: deque[tuple[int, str]] = deque(maxlen=logged_changes)
        """The latest changes of all jobs, (event id, job id), for the server-wide stream."""
        self._any = asyncio.Event()

    @property
    def latest(self) -> int:
        """The id of the latest change of any job."""
        return self._counter

    def version(self, job_id: str) -> int:
        """The id of the latest change seen for `job_id` (0: none since this process began)."""
        return self._versions.get(job_id, 0)

    def publish(self, job_id: str, job: Job | None = None, *, progress_only: bool = False) -> None:
        """`job`: the job as this change left it, if known."""
        self._counter += 1
        self._versions[job_id] = self._counter
        self._versions.move_to_end(job_id)
        if len(self._versions) > self._remembered:
            self._versions.popitem(last=False)
        event = self._changed.pop(job_id, None)
        if event is not None:
            event.change = Change(self._counter, job, progress_only)
            event.set()
        self._log.append((self._counter, job_id))
        self._any.set()
        self._any = asyncio.Event()

    def changed_since(self, seen: int) -> list[str] | None:
        """The jobs changed after event `seen`, each once, in the order of their latest change;
        None when `seen` is not an id of this process's log (too old, or from elsewhere)."""
        if seen == self._counter:
            return []
        if seen > self._counter or not self._log or seen < self._log[0][0] - 1:
            return None
        latest: dict[str, int] = {}
        for event_id, job_id in reversed(self._log):
            if event_id <= seen:
                break
            latest.setdefault(job_id, event_id)
        return sorted(latest, key=latest.__getitem__)

    async def wait_for_any(self, seen: int) -> None:
        """Until any job changes after event `seen`."""
        if self._counter == seen:
            await self._any.wait()

    async def wait_for_change(self, job_id: str, seen: int, timeout_s: float | None = None) -> bool:
        """Wait until `job_id` changes after version `seen` (for ever when `timeout_s` is None);
        False on timeout."""
        return await self.next_change(job_id, seen, timeout_s) is not None

    async def next_change(
        self, job_id: str, seen: int, timeout_s: float | None = None
    ) -> Change | None:
        """The first change of `job_id` after version `seen` (for ever when `timeout_s` is
        None); None on timeout. Changes made before the call come without the job."""
        if (version := self.version(job_id)) != seen:
            return Change(version, None)
        event = self._changed[job_id]
        try:
            await asyncio.wait_for(event.wait(), timeout_s)
        except TimeoutError:
            return None
        assert event.change is not None  # set with the event
        return event.change


class PublishingJobStore(JobStore):
    """A `JobStore` that tells `JobEvents` about every change it commits."""

    def __init__(self, inner: JobStore, events: JobEvents) -> None:
        self._inner = inner
        self._events = events
        self.on_released: Callable[[], None] | None = None
        """Called when a job's end released jobs waiting for it (the dispatcher's wake-up:
        unblocked jobs may start). Set once the dispatcher exists."""

    async def create(self, new: NewJob, *, max_queued: int, now: datetime) -> tuple[Job, bool]:
        job, created = await self._inner.create(new, max_queued=max_queued, now=now)
        if created:
            self._events.publish(job.id, job)
        return job, created

    async def create_chain(
        self, chain: list[NewJob], *, max_queued: int, now: datetime
    ) -> list[Job]:
        jobs = await self._inner.create_chain(chain, max_queued=max_queued, now=now)
        for job in jobs:
            self._events.publish(job.id, job)
        return jobs

    async def get(self, job_id: str) -> Job:
        return await self._inner.get(job_id)

    async def list_jobs(self, where: JobFilter, *, limit: int, before_seq: int | None) -> Page:
        return await self._inner.list_jobs(where, limit=limit, before_seq=before_seq)

    async def next_queued(self, limit: int, order: QueueOrder | None = None) -> list[Job]:
        return await self._inner.next_queued(limit, order)

    async def count_queued(self, kind: JobKind | None = None) -> int:
        return await self._inner.count_queued(kind)

    async def counts(self) -> dict[tuple[str, str], int]:
        return await self._inner.counts()

    async def claim(
        self, job_id: str, devices: tuple[str, ...], now: datetime, model_id: str | None = None
    ) -> Job | None:
        job = await self._inner.claim(job_id, devices, now, model_id)
        if job is not None:
            self._events.publish(job.id, job)
        return job

    async def set_progress(self, job_id: str, progress: Progress) -> None:
        await self._inner.set_progress(job_id, progress)
        self._events.publish(job_id, progress_only=True)

    async def switch_model(self, job_id: str, model_id: str) -> None:
        await self._inner.switch_model(job_id, model_id)
        self._events.publish(job_id)

    def released(self) -> list[Job]:
        return self._inner.released()

    def _publish_released(self) -> None:
        released = self._inner.released()
        for job in released:
            self._events.publish(job.id, job)
        if released and self.on_released is not None:
            self.on_released()

    async def finish(self, job_id: str, outcome: Outcome, now: datetime) -> Job:
        job = await self._inner.finish(job_id, outcome, now)
        self._events.publish(job.id, job)
        self._publish_released()
        return job

    async def kept_result(self, job_id: str) -> bytes | None:
        return await self._inner.kept_result(job_id)

    async def cancel(self, job_id: str, now: datetime) -> Job:
        job = await self._inner.cancel(job_id, now)
        self._events.publish(job.id, job)
        self._publish_released()
        return job

    async def recover(
        self,
        now: datetime,
        drained: frozenset[str] = frozenset(),
        spared: frozenset[str] = frozenset(),
    ) -> list[Job]:
        jobs = await self._inner.recover(now, drained, spared)
        for job in jobs:
            self._events.publish(job.id, job)
        self._publish_released()
        return jobs

    async def requeue(self, job_id: str, now: datetime) -> Job:
        job = await self._inner.requeue(job_id, now)
        self._events.publish(job.id, job)
        self._publish_released()
        return job

    async def recent_durations(self, limit: int, kind: JobKind | None = None) -> list[float]:
        return await self._inner.recent_durations(limit, kind)

    async def delete(self, job_id: str) -> Job:
        job = await self._inner.delete(job_id)
        self._events.publish(job.id)  # a follower looks again and finds it gone
        return job

    async def expire(
        self, *, finished_before: datetime | None, keep: int | None, limit: int
    ) -> list[Job]:
        jobs = await self._inner.expire(finished_before=finished_before, keep=keep, limit=limit)
        for job in jobs:
            self._events.publish(job.id)
        return jobs

    async def unknown(self, job_ids: list[str]) -> set[str]:
        return await self._inner.unknown(job_ids)

    async def check_writable(self) -> None:
        await self._inner.check_writable()
