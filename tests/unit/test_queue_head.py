"""The dispatcher's view of the queue head: one read serves several admission passes, and any
change to the queue from outside the dispatcher makes the next pass read again."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from yolo_orch.dispatch.queue_head import MAX_AGE_S, MAX_HELD, SPARE, QueueHead
from yolo_orch.domain import Job, JobKind, NewJob, QueueOrder
from yolo_orch.store.memory import InMemoryJobStore

T0 = datetime(2026, 12, 1, tzinfo=UTC)
ORDER = QueueOrder(T0)


class CountingStore(InMemoryJobStore):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.during_read: asyncio.Event | None = None

    async def next_queued(self, limit: int, order: QueueOrder | None = None) -> list[Job]:
        self.reads += 1
        jobs = await super().next_queued(limit, order)
        if self.during_read is not None:
            await self.during_read.wait()
        return jobs


async def add(
    store: InMemoryJobStore, count: int, priority: int = 0, now: datetime = T0
) -> list[Job]:
    jobs = []
    for _ in range(count):
        new = NewJob(kind=JobKind.INFERENCE, model="sim", spec={}, priority=priority)
        jobs.append((await store.create(new, max_queued=10_000, now=now))[0])
    return jobs


async def test_passes_take_from_one_read_less_what_they_started() -> None:
    store = CountingStore()
    jobs = await add(store, 3 + SPARE + 2)
    head = QueueHead(store)

    first = await head.first(3, ORDER, now=0.0)
    head.started({first[0].id})
    second = await head.first(3, ORDER, now=0.1)

    assert first == jobs[:3]
    assert second == jobs[1:4]
    assert store.reads == 1


async def test_jobs_started_from_inside_the_head_leave_the_rest_in_order() -> None:
    store = CountingStore()
    jobs = await add(store, 6)
    head = QueueHead(store)
    await head.first(6, ORDER, now=0.0)

    head.started({jobs[0].id, jobs[2].id, jobs[4].id})

    assert await head.first(6, ORDER, now=0.1) == [jobs[1], jobs[3], jobs[5]]
    assert store.reads == 1


async def test_a_whole_queue_read_stops_growing_and_then_holds_the_head_only() -> None:
    store = CountingStore()
    head = QueueHead(store)
    await head.first(3, ORDER, now=0.0)  # the queue is empty: the read is the whole of it

    jobs = await add(store, MAX_HELD + 1)
    for job in jobs:
        head.queued(job, ORDER)
    assert await head.first(MAX_HELD, ORDER, now=0.1) == jobs[:MAX_HELD]
    assert store.reads == 1

    head.started({job.id for job in jobs[:MAX_HELD]})
    await head.first(3, ORDER, now=0.2)  # the last job was left out of it: the store is read
    assert store.reads == 2


async def test_a_change_from_outside_means_a_new_read() -> None:
    store = CountingStore()
    await add(store, 2)
    head = QueueHead(store)
    await head.first(3, ORDER, now=0.0)

    urgent = (await add(store, 1, priority=5))[0]
    assert (await head.first(3, ORDER, now=0.1))[0] != urgent  # nobody said the queue changed
    head.forget()
    assert (await head.first(3, ORDER, now=0.2))[0] == urgent
    assert store.reads == 2


async def test_an_old_read_of_the_head_is_read_again() -> None:
    store = CountingStore()
    await add(store, 3 + SPARE + 2)  # more than one read takes: it holds the head only
    head = QueueHead(store)
    await head.first(3, ORDER, now=0.0)

    await head.first(3, ORDER, now=MAX_AGE_S + 0.01)
    assert store.reads == 2


async def test_an_old_read_of_the_whole_queue_is_sorted_again_by_aging_not_read() -> None:
    store = CountingStore()
    old = (await add(store, 1, priority=0))[0]
    urgent = (await add(store, 1, priority=2, now=T0 + timedelta(minutes=1.5)))[0]
    head = QueueHead(store)
    at_first = QueueOrder(T0 + timedelta(minutes=1.5), aging_per_minute=1.0)
    assert await head.first(3, at_first, now=0.0) == [urgent, old]  # 2 + 0 against 0 + 1

    later = QueueOrder(T0 + timedelta(minutes=2), aging_per_minute=1.0)  # 2 + 0 against 0 + 2
    assert await head.first(3, later, now=0.1) == [urgent, old]  # not due for a new order yet
    assert await head.first(3, later, now=MAX_AGE_S + 0.01) == [old, urgent]  # tied: seq
    assert store.reads == 1


async def test_a_read_that_runs_short_of_the_window_is_the_whole_queue() -> None:
    store = CountingStore()
    jobs = await add(store, 2)
    head = QueueHead(store)

    await head.first(3, ORDER, now=0.0)
    head.started({jobs[0].id})

    assert await head.first(3, ORDER, now=0.1) == jobs[1:]
    assert store.reads == 1


async def test_a_read_overtaken_by_a_change_is_not_kept() -> None:
    store = CountingStore()
    await add(store, 2)
    head = QueueHead(store)
    store.during_read = asyncio.Event()

    reading = asyncio.create_task(head.first(3, ORDER, now=0.0))
    await asyncio.sleep(0)
    urgent = (await add(store, 1, priority=5))[0]
    head.forget()  # a submission while the read was under way
    store.during_read.set()
    await reading

    assert (await head.first(3, ORDER, now=0.1))[0] == urgent
    assert store.reads == 2


async def test_a_submission_behind_the_head_keeps_it_and_one_ahead_of_it_is_read() -> None:
    store = CountingStore()
    await add(store, 2, priority=1)
    head = QueueHead(store)
    before = await head.first(3, ORDER, now=0.0)

    later = (await add(store, 1, priority=1))[0]
    head.queued(later, ORDER)  # behind both: joins the whole queue as read
    assert await head.first(3, ORDER, now=0.1) == [*before, later]
    assert store.reads == 1

    urgent = (await add(store, 1, priority=5))[0]
    head.queued(urgent, ORDER)
    assert (await head.first(3, ORDER, now=0.2))[0] == urgent
    assert store.reads == 2


async def test_a_submission_during_a_read_is_not_lost() -> None:
    store = CountingStore()
    head = QueueHead(store)
    store.during_read = asyncio.Event()

    reading = asyncio.create_task(head.first(3, ORDER, now=0.0))
    await asyncio.sleep(0)  # the read found an empty queue
    job = (await add(store, 1))[0]
    head.queued(job, ORDER)
    store.during_read.set()
    assert await reading == []

    assert await head.first(3, ORDER, now=0.1) == [job]


async def test_a_read_leaves_out_started_jobs_whose_claims_it_may_not_see() -> None:
    store = CountingStore()
    running, queued = await add(store, 2)
    head = QueueHead(store)
    head.started({running.id})  # its claim is being committed: the store says queued still

    assert await head.read(10, ORDER) == [queued]
    head.claimed({running.id})
    assert await head.read(10, ORDER) == [running, queued]  # what the store says is the truth


async def test_a_claim_committed_while_a_read_was_under_way_is_left_out_of_it() -> None:
    store = CountingStore()
    running, queued = await add(store, 2)
    head = QueueHead(store)
    head.started({running.id})
    store.during_read = asyncio.Event()
    reading = asyncio.create_task(head.first(3, ORDER, now=0.0))
    while store.reads == 0:
        await asyncio.sleep(0)

    head.claimed({running.id})  # committed after the read's snapshot: it shows the job queued
    store.during_read.set()

    assert await reading == [queued]
