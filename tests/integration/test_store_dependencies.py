"""The contract of jobs that wait for others, for every `JobStore` (memory and SQLite): blocked
while they wait, released or cancelled in the write that ends what they wait for, chains stored
all or nothing, unique keys, models resolved at the claim, and the outbox told of each change."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.postgres import ENGINES, migrated_url
from tests.support.stores import ROOMY, T0, add, new_job, open_database, running
from yolo_orch.domain import Job, JobError, JobFilter, JobState, NewModel, Outcome
from yolo_orch.domain.chains import Dependency
from yolo_orch.domain.webhooks import WebhookEvent
from yolo_orch.errors import (
    DependencyFailed,
    DependencyNotFound,
    ErrorCode,
    IdempotencyKeyReused,
    QueueFull,
)
from yolo_orch.store.base import JobStore, ModelStore
from yolo_orch.store.memory import InMemoryDatabase, InMemoryJobStore
from yolo_orch.store.memory_models import InMemoryModelStore
from yolo_orch.store.outbox import Outbox
from yolo_orch.store.sql_jobs import SqlJobStore
from yolo_orch.store.sql_models import SqlModelStore

SUCCEEDED = Outcome(JobState.SUCCEEDED, result={"n": 1})
FAILED = Outcome(JobState.FAILED, JobError("runtime_error", "boom"))


class Recording(Outbox):
    """Keeps what the store asked it to record, as (job id, event, state)."""

    active = True

    def __init__(self) -> None:
        self.events: list[tuple[str, WebhookEvent, JobState]] = []
        self.wakes = 0

    def record(self, tx: Any, job: Job, event: WebhookEvent, now: datetime) -> bool:
        self.events.append((job.id, event, job.state))
        return True

    def committed(self) -> None:
        self.wakes += 1


Stores = tuple[Recording, JobStore, ModelStore]


@pytest.fixture(params=ENGINES)
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    outbox = Recording()
    if request.param == "memory":
        memory = InMemoryDatabase()
        yield outbox, InMemoryJobStore(memory, outbox=outbox), InMemoryModelStore(memory)
        return
    url = await migrated_url(request.param, request, tmp_path)
    async with open_database(url) as db:
        yield outbox, SqlJobStore(db, outbox=outbox), SqlModelStore(db)


@pytest.fixture
def outbox_and_store(stores: Stores) -> tuple[Recording, JobStore]:
    return stores[0], stores[1]


@pytest.fixture
def store(stores: Stores) -> JobStore:
    return stores[1]


async def _finish(store: JobStore, job: Job, outcome: Outcome = SUCCEEDED) -> Job:
    claimed = await store.claim(job.id, ("sim:0",), T0)
    assert claimed is not None
    return await store.finish(job.id, outcome, T0)


async def test_a_waiting_job_is_never_next_until_what_it_waits_for_ends(store: JobStore) -> None:
    first = await add(store)
    waiting = await add(store, after=(Dependency(first.id),), priority=50)
    assert waiting.blocked
    assert waiting.state is JobState.QUEUED
    assert [job.id for job in await store.next_queued(10)] == [first.id]

    await _finish(store, first, FAILED)  # `after`: any end releases it
    released = store.released()
    assert [(job.id, job.blocked) for job in released] == [(waiting.id, False)]
    assert not (await store.get(waiting.id)).blocked
    assert [job.id for job in await store.next_queued(10)] == [waiting.id]
    assert store.released() == []


async def test_a_job_waiting_for_two_is_released_by_the_second_end(store: JobStore) -> None:
    one, two = await add(store), await add(store)
    waiting = await add(store, after=(Dependency(one.id), Dependency(two.id, ok_only=True)))
    await _finish(store, one)
    assert (await store.get(waiting.id)).blocked
    await _finish(store, two)
    assert not (await store.get(waiting.id)).blocked


async def test_after_ok_cancels_in_the_same_write_and_cascades(
    outbox_and_store: tuple[Recording, JobStore],
) -> None:
    outbox, store = outbox_and_store
    head = await add(store)
    middle = await add(store, after=(Dependency(head.id, ok_only=True),))
    last = await add(store, after=(Dependency(middle.id, ok_only=True),))
    other = await add(store, after=(Dependency(middle.id),))  # any end: released, not cancelled

    await _finish(store, head, FAILED)
    for job_id in (middle.id, last.id):
        job = await store.get(job_id)
        assert job.state is JobState.CANCELLED
        assert job.error is not None
        assert job.error.code == ErrorCode.DEPENDENCY_FAILED
        assert job.finished_at == T0
    assert not (await store.get(other.id)).blocked
    assert {job.id for job in store.released()} == {middle.id, last.id, other.id}
    cancelled = [job_id for job_id, event, _ in outbox.events if event is WebhookEvent.CANCELLED]
    assert sorted(cancelled) == sorted([middle.id, last.id])


async def test_cancelling_a_queued_dependency_cancels_its_after_ok_jobs(store: JobStore) -> None:
    head = await add(store)
    waiting = await add(store, after=(Dependency(head.id, ok_only=True),))
    await store.cancel(head.id, T0)
    assert (await store.get(waiting.id)).state is JobState.CANCELLED


async def test_dependencies_that_ended_are_settled_at_submission(store: JobStore) -> None:
    done = await _finish(store, await add(store))
    failed = await _finish(store, await add(store), FAILED)
    free = await add(store, after=(Dependency(done.id, ok_only=True), Dependency(failed.id)))
    assert not free.blocked
    with pytest.raises(DependencyFailed):
        await add(store, after=(Dependency(failed.id, ok_only=True),))
    with pytest.raises(DependencyNotFound):
        await add(store, after=(Dependency("nobody"),))
    assert len((await store.list_jobs(JobFilter(), limit=10, before_seq=None)).jobs) == 3


async def test_a_chain_is_stored_whole_or_not_at_all(store: JobStore) -> None:
    first = new_job(chain_id="c")
    step = new_job(after=(Dependency(first.id, ok_only=True),), chain_id="c", parent_id=first.id)
    first = replace(first, chain_id=first.id)
    step = replace(step, chain_id=first.id)
    jobs = await store.create_chain([first, step], max_queued=ROOMY, now=T0)
    assert [job.id for job in jobs] == [first.id, step.id]
    assert jobs[1].blocked
    assert jobs[1].parent_id == first.id
    listed = await store.list_jobs(JobFilter(chain_id=first.id), limit=10, before_seq=None)
    assert [job.id for job in listed.jobs] == [step.id, first.id]

    # A queue with room for one job of a chain of two stores neither.
    await add(store)
    roomless = [new_job(), new_job()]
    roomless[1] = replace(roomless[1], after=(Dependency(roomless[0].id),))
    with pytest.raises(QueueFull):
        await store.create_chain(roomless, max_queued=4, now=T0)
    for new in roomless:
        assert new.id not in {
            j.id for j in (await store.list_jobs(JobFilter(), limit=9, before_seq=None)).jobs
        }


async def test_a_unique_key_answers_the_active_job_within_its_window(store: JobStore) -> None:
    first = await add(store, unique_key="k", unique_for_s=60)
    same, created = await store.create(
        new_job(unique_key="k", unique_for_s=60), max_queued=ROOMY, now=T0 + timedelta(seconds=30)
    )
    assert (same.id, created) == (first.id, False)
    later, created = await store.create(
        new_job(unique_key="k", unique_for_s=60), max_queued=ROOMY, now=T0 + timedelta(seconds=90)
    )
    assert created
    assert later.id != first.id
    await _finish(store, later)
    await _finish(store, first)
    _again, created = await store.create(
        new_job(unique_key="k", unique_for_s=60), max_queued=ROOMY, now=T0 + timedelta(seconds=91)
    )
    assert created


async def test_a_retry_is_answered_by_its_idempotency_key_before_its_key_or_dependencies(
    store: JobStore,
) -> None:
    """Whatever changed since the first try (its dependency failed, another job took its unique
    key), the retry with the same Idempotency-Key returns the job the first try made."""
    head = await add(store)
    first = await add(
        store,
        after=(Dependency(head.id, ok_only=True),),
        unique_key="k",
        unique_for_s=60,
        idempotency_key="retry-1",
        request_fingerprint="f1",
    )
    await _finish(store, head, FAILED)  # cancels `first`: a new submission would be refused
    other = await add(store, unique_key="k", unique_for_s=60)
    retried, created = await store.create(
        new_job(
            after=(Dependency(head.id, ok_only=True),),
            unique_key="k",
            unique_for_s=60,
            idempotency_key="retry-1",
            request_fingerprint="f1",
        ),
        max_queued=ROOMY,
        now=T0,
    )
    assert (retried.id, retried.state, created) == (first.id, JobState.CANCELLED, False)
    assert other.id != first.id
    with pytest.raises(IdempotencyKeyReused):
        await store.create(
            new_job(unique_key="k", idempotency_key="retry-1", request_fingerprint="f2"),
            max_queued=ROOMY,
            now=T0,
        )


async def test_the_claim_records_the_model_resolved_at_the_start(stores: Stores) -> None:
    _, store, models = stores
    first, _ = await models.add(_model("a", "1" * 64), T0)
    second, _ = await models.add(_model("b", "2" * 64), T0)
    job = await add(store, model="det@prod", model_id=first.id)
    claimed = await store.claim(job.id, ("sim:0",), T0, model_id=None)
    assert claimed is not None
    assert claimed.model_id == first.id
    other = await add(store, model="det@prod", model_id=first.id)
    claimed = await store.claim(other.id, ("sim:0",), T0, model_id=second.id)
    assert claimed is not None
    assert claimed.model_id == second.id
    assert (await store.get(other.id)).model_id == second.id
    await store.switch_model(other.id, first.id)
    assert (await store.get(other.id)).model_id == first.id


def _model(name: str, sha256: str) -> NewModel:
    return NewModel(name, sha256, 1, "detect", ("a",), "upload", f"{name}.pt")


async def test_every_change_is_offered_to_the_outbox_with_its_write(
    outbox_and_store: tuple[Recording, JobStore],
) -> None:
    outbox, store = outbox_and_store
    job = await running(store)
    await store.finish(job.id, SUCCEEDED, T0)
    queued = await add(store)
    await store.cancel(queued.id, T0)
    lost = await running(store)
    await store.recover(T0)
    assert outbox.events == [
        (job.id, WebhookEvent.QUEUED, JobState.QUEUED),
        (job.id, WebhookEvent.STARTED, JobState.RUNNING),
        (job.id, WebhookEvent.SUCCEEDED, JobState.SUCCEEDED),
        (queued.id, WebhookEvent.QUEUED, JobState.QUEUED),
        (queued.id, WebhookEvent.CANCELLED, JobState.CANCELLED),
        (lost.id, WebhookEvent.QUEUED, JobState.QUEUED),
        (lost.id, WebhookEvent.STARTED, JobState.RUNNING),
        (lost.id, WebhookEvent.QUEUED, JobState.QUEUED),  # requeued by recovery
    ]
    assert outbox.wakes >= 7
