"""The queue as the dispatcher would take it: its first jobs in start order, each with its
effective priority (aging included) and when it is expected to start, by the estimate that a
429's `Retry-After` says (`dispatch/queue_wait.py`): one definition of both."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from yolo_orch.dispatch.queue_wait import expected_starts_s
from yolo_orch.domain import Job, JobKind, QueueOrder
from yolo_orch.store.base import JobStore


@dataclass(frozen=True)
class QueueEntry:
    job: Job
    effective_priority: int
    expected_wait_s: float


@dataclass(frozen=True)
class QueueView:
    at: datetime
    queued: int
    """Every queued job: those waiting for others (`after`) or for more lanes than are healthy
    too, which the entries leave out (they are not next, whatever their priority)."""
    entries: list[QueueEntry]


async def read_queue(
    store: JobStore,
    order: QueueOrder,
    running: Sequence[Job],
    recent: Mapping[JobKind, Sequence[float]],
    slots: int,
    limit: int,
) -> QueueView:
    head = await store.next_queued(limit, order)
    kinds = [job.kind for job in head]
    starts = expected_starts_s(running, kinds, recent, slots=slots, now=order.now)
    return QueueView(
        at=order.now,
        queued=await store.count_queued(),
        entries=[
            QueueEntry(job, order.effective_priority(job.priority, job.created_at), start)
            for job, start in zip(head, starts, strict=True)
        ],
    )
