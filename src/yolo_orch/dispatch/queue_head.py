"""The head of the queue as the dispatcher last read it, so that an admission pass after a run
ends need not read the store again: while nothing but the dispatcher's own starts changed the
queue, the head is what the last read found, less the jobs started since.

Every read of the store leaves out the jobs started whose claims had not committed when it
began: its snapshot may still show them queued, and by the time it answers they may have run
and ended (a zero-second job's claim, run and outcome take a few milliseconds, a read under
load as long), so the dispatcher would start them again."""

from __future__ import annotations

from dataclasses import dataclass

from yolo_orch.domain import Job, QueueOrder
from yolo_orch.store.base import JobStore

SPARE = 32
"""Jobs read beyond the window asked for, so that one read serves several passes."""
MAX_HELD = 256
"""Jobs a read that holds the whole queue may grow to as jobs are submitted behind it. Past
that it holds the head only: a queue of thousands kept in memory made every full garbage
collection scan them (30-100 ms pauses of the event loop at 16,000 queued jobs)."""
MAX_AGE_S = 0.5
"""A read older than this is sorted again (the whole queue) or read again (its head only): aging
moves jobs up the queue as time passes (by whole steps per minute, so half a second of it
changes at most who of two ties starts first)."""


@dataclass
class _Read:
    jobs: list[Job]
    complete: bool
    """The read found fewer jobs than it asked for: these are the whole queue."""
    max_gpus: int | None
    """The read left out jobs needing more lanes than this."""
    at: float


class QueueHead:
    def __init__(self, store: JobStore) -> None:
        self._store = store
        self._read: _Read | None = None
        self._changes = 0
        self._unclaimed: set[str] = set()
        """Jobs started whose claims have not committed yet."""

    def forget(self) -> None:
        """Something else changed the queue (a submission, a cancel, a requeue): read again."""
        self._read = None
        self._changes += 1

    def queued(self, job: Job, order: QueueOrder) -> None:
        """`job` was submitted. If it starts after every job read (no higher priority than the
        last of them: the usual case), the head as read stays true, and the job joins it when
        that read was the whole queue (until it holds `MAX_HELD`); otherwise the next pass reads
        again."""
        self._changes += 1  # a read under way may have missed the job
        read = self._read
        if read is None:
            return
        last = read.jobs[-1] if read.jobs else None
        behind = last is None or order.effective_priority(
            job.priority, job.created_at
        ) <= order.effective_priority(last.priority, last.created_at)
        if not behind:
            self._read = None
        elif read.complete and order.admits(job):
            if len(read.jobs) < MAX_HELD:
                read.jobs.append(job)
            else:
                read.complete = False  # from here it holds the head only

    def started(self, job_ids: set[str]) -> None:
        """Jobs the dispatcher started (they are no longer queued); `claimed` follows once
        their claims have committed (or failed)."""
        self._unclaimed |= job_ids
        if self._read is not None:  # a copy of at most MAX_HELD jobs
            self._read.jobs = [job for job in self._read.jobs if job.id not in job_ids]

    def claimed(self, job_ids: set[str]) -> None:
        """The claims of these started jobs have committed, or failed: the store says what
        they are."""
        self._unclaimed -= job_ids

    async def read(self, limit: int, order: QueueOrder) -> list[Job]:
        """The first `limit` queued jobs in the store, less those started before the read
        whose claims it may not see (so fewer than `limit` need not be the whole queue)."""
        return (await self._read_store(limit, order))[0]

    async def _read_store(self, limit: int, order: QueueOrder) -> tuple[list[Job], bool]:
        """The read, and whether it was the whole queue."""
        hidden = set(self._unclaimed)
        jobs = await self._store.next_queued(limit, order)
        complete = len(jobs) < limit
        hidden |= self._unclaimed  # and any started while it was under way
        if hidden:
            jobs = [job for job in jobs if job.id not in hidden]
        return jobs, complete

    async def first(self, window: int, order: QueueOrder, now: float) -> list[Job]:
        """The first `window` queued jobs in start order (`now`: the loop's time)."""
        read = self._read
        if read is not None and read.complete and now - read.at > MAX_AGE_S:
            # The whole queue is in hand: time can reorder it (aging) but brings no job in.
            read.jobs, read.at = order.sort(read.jobs), now
        if (
            read is None
            or now - read.at > MAX_AGE_S
            or read.max_gpus != order.max_gpus
            or (len(read.jobs) < window and not read.complete)
        ):
            changes = self._changes
            jobs, complete = await self._read_store(window + SPARE, order)
            read = _Read(jobs, complete, order.max_gpus, now)
            # Kept only if nothing changed the queue while it was read.
            self._read = read if changes == self._changes else None
        return read.jobs[:window]
