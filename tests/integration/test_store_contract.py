"""One contract for every `JobStore`: the in-memory fake must behave as the durable store does,
on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.postgres import ENGINES, migrated_url
from tests.support.stores import ROOMY, T0, add, new_job, open_database, running
from yolo_orch.domain import (
    Job,
    JobError,
    JobFilter,
    JobKind,
    JobState,
    NewJob,
    Outcome,
    Progress,
    QueueOrder,
)
from yolo_orch.errors import (
    ErrorCode,
    IdempotencyKeyReused,
    JobActive,
    JobAlreadyFinished,
    JobNotFound,
    ModelNotFound,
    QueueFull,
)
from yolo_orch.store.base import JobStore
from yolo_orch.store.memory import InMemoryJobStore
from yolo_orch.store.sql_jobs import SqlJobStore


@pytest.fixture(params=ENGINES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[JobStore]:
    if request.param == "memory":
        yield InMemoryJobStore()
        return
    url = await migrated_url(request.param, request, tmp_path)
    async with open_database(url) as db:
        yield SqlJobStore(db)


async def test_create_and_get_round_trip_every_field(store: JobStore) -> None:
    spec = {"dataset": "coco8/data.yaml", "params": {"epochs": 3, "lr0": 0.01, "tags": ["x"]}}
    job, created = await store.create(
        NewJob(
            kind=JobKind.TRAINING,
            model="yolo11n.yaml",
            spec=spec,
            priority=7,
            gpus=2,
            max_attempts=5,
            idempotency_key="k-1",
            request_fingerprint="fp-1",
        ),
        max_queued=ROOMY,
        now=T0,
    )

    assert created
    assert (job.kind, job.state, job.model, job.spec.stored()) == (
        JobKind.TRAINING,
        JobState.QUEUED,
        "yolo11n.yaml",
        spec,
    )
    assert (job.priority, job.gpus, job.attempt, job.max_attempts) == (7, 2, 0, 5)
    assert (job.idempotency_key, job.request_fingerprint) == ("k-1", "fp-1")
    assert (job.devices, job.progress, job.error, job.result) == ((), None, None, None)
    assert not job.cancel_requested
    assert job.created_at == T0
    assert job.started_at is None
    assert job.finished_at is None
    assert await store.get(job.id) == job

    started = T0 + timedelta(seconds=1)
    claimed = await store.claim(job.id, ("sim:0", "sim:1"), started)
    await store.set_progress(job.id, Progress(1, 3, "epoch"))
    finished = await store.finish(
        job.id,
        Outcome(
            JobState.FAILED,
            error=JobError(ErrorCode.CUDA_OOM, "out of memory"),
            result={"epochs_done": 1, "metrics": {"map50": 0.5}},
        ),
        started + timedelta(minutes=2),
    )

    assert claimed is not None
    assert finished == await store.get(job.id)
    assert finished.devices == ("sim:0", "sim:1")
    assert finished.progress == Progress(1, 3, "epoch")
    assert finished.error == JobError(ErrorCode.CUDA_OOM, "out of memory")
    assert finished.result == {"epochs_done": 1, "metrics": {"map50": 0.5}}
    for moment, expected in [
        (finished.created_at, T0),
        (finished.started_at, started),
        (finished.finished_at, started + timedelta(minutes=2)),
    ]:
        assert moment == expected
        assert moment is not None
        assert moment.utcoffset() == timedelta(0)


async def test_get_unknown_id_raises(store: JobStore) -> None:
    with pytest.raises(JobNotFound):
        await store.get("no-such-job")


async def test_same_idempotency_key_returns_the_same_job(store: JobStore) -> None:
    first = await add(store, idempotency_key="key", request_fingerprint="fp")

    again, created = await store.create(
        new_job(idempotency_key="key", request_fingerprint="fp"), max_queued=ROOMY, now=T0
    )

    assert not created
    assert again == first
    assert await store.count_queued() == 1


async def test_idempotency_key_with_another_request_is_refused(store: JobStore) -> None:
    first = await add(store, idempotency_key="key", request_fingerprint="fp")

    with pytest.raises(IdempotencyKeyReused) as raised:
        await store.create(
            new_job(idempotency_key="key", request_fingerprint="other"), max_queued=ROOMY, now=T0
        )

    assert raised.value.job_id == first.id
    assert await store.count_queued() == 1


async def test_concurrent_creates_with_one_key_make_one_job(store: JobStore) -> None:
    same = new_job(idempotency_key="key", request_fingerprint="fp")

    results = await asyncio.gather(
        *(store.create(same, max_queued=ROOMY, now=T0) for _ in range(50))
    )

    assert len({job.id for job, _ in results}) == 1
    assert sum(created for _, created in results) == 1
    page = await store.list_jobs(JobFilter(), limit=100, before_seq=None)
    assert len(page.jobs) == 1


async def test_full_queue_refuses_and_stores_nothing(store: JobStore) -> None:
    first = await add(store)
    await add(store)

    with pytest.raises(QueueFull):
        await store.create(new_job(), max_queued=2, now=T0)

    assert await store.count_queued() == 2
    assert len((await store.list_jobs(JobFilter(), limit=10, before_seq=None)).jobs) == 2
    # Only queued jobs count against the bound.
    await store.claim(first.id, ("sim:0",), T0)
    _, created = await store.create(new_job(), max_queued=2, now=T0)
    assert created


async def test_list_jobs_newest_first_with_filters_and_cursor(store: JobStore) -> None:
    jobs = [
        await add(store, kind=JobKind.TRAINING if i % 3 == 0 else JobKind.INFERENCE)
        for i in range(10)
    ]
    for job in jobs[:4]:
        await store.claim(job.id, ("sim:0",), T0)

    seen: list[int] = []
    cursor = None
    while True:
        page = await store.list_jobs(JobFilter(), limit=3, before_seq=cursor)
        seen += [job.seq for job in page.jobs]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor

    assert seen == sorted((job.seq for job in jobs), reverse=True)
    queued = await store.list_jobs(JobFilter(states=(JobState.QUEUED,)), limit=100, before_seq=None)
    assert [job.id for job in queued.jobs] == [job.id for job in reversed(jobs[4:])]
    assert queued.next_cursor is None
    training = await store.list_jobs(
        JobFilter(kinds=(JobKind.TRAINING,)), limit=100, before_seq=None
    )
    assert [job.id for job in training.jobs] == [jobs[i].id for i in (9, 6, 3, 0)]
    both = await store.list_jobs(
        JobFilter(states=(JobState.RUNNING, JobState.FAILED), kinds=(JobKind.TRAINING,)),
        limit=100,
        before_seq=None,
    )
    assert [job.id for job in both.jobs] == [jobs[3].id, jobs[0].id]
    repeated = JobFilter(states=(JobState.QUEUED,) * 1000, kinds=(JobKind.TRAINING,) * 1000)
    assert repeated == JobFilter(states=(JobState.QUEUED,), kinds=(JobKind.TRAINING,))
    once = await store.list_jobs(repeated, limit=100, before_seq=None)  # one term, not 10^6
    assert [job.id for job in once.jobs] == [jobs[9].id, jobs[6].id]


async def test_list_jobs_by_id_prefix_and_by_model(store: JobStore) -> None:
    jobs = [await add(store, model="yolo11n" if i % 2 else "detector@production") for i in range(6)]
    started = await store.claim(jobs[4].id, ("sim:0",), T0)
    assert started is not None

    for job in jobs:
        found = await store.list_jobs(JobFilter(id_prefix=job.id[:8]), limit=10, before_seq=None)
        assert [each.id for each in found.jobs] == [job.id]
    by_model = await store.list_jobs(
        JobFilter(model="detector@production"), limit=2, before_seq=None
    )
    assert [job.id for job in by_model.jobs] == [jobs[4].id, jobs[2].id]
    older = await store.list_jobs(
        JobFilter(model="detector@production"), limit=2, before_seq=by_model.next_cursor
    )
    assert [job.id for job in older.jobs] == [jobs[0].id]
    assert older.next_cursor is None
    queued_of_model = JobFilter(states=(JobState.QUEUED,), model="detector@production")
    page = await store.list_jobs(queued_of_model, limit=10, before_seq=None)
    assert [job.id for job in page.jobs] == [jobs[2].id, jobs[0].id]
    assert all(queued_of_model.matches(job) for job in page.jobs)
    assert not queued_of_model.matches(started)
    assert not queued_of_model.matches(jobs[1])
    nothing = await store.list_jobs(JobFilter(model="yolo11"), limit=10, before_seq=None)
    assert nothing.jobs == []  # the name exactly, not a part of it


async def test_next_queued_by_priority_then_submission_order(store: JobStore) -> None:
    jobs = [await add(store, priority=priority) for priority in (0, 5, 0, 5, 1, 9)]
    await store.claim(jobs[5].id, ("sim:0",), T0)

    order = await store.next_queued(limit=10)

    assert [job.id for job in order] == [jobs[i].id for i in (1, 3, 4, 0, 2)]
    assert [job.id for job in await store.next_queued(limit=2)] == [jobs[1].id, jobs[3].id]


async def test_next_queued_ages_waiting_jobs_and_keeps_fifo_within_a_priority(
    store: JobStore,
) -> None:
    old_low = await add(store, T0, priority=-5)
    older_low = [await add(store, T0 + timedelta(minutes=1), priority=-5) for _ in range(2)]
    fresh = [await add(store, T0 + timedelta(minutes=10), priority=p) for p in (0, 3, 0)]
    now = T0 + timedelta(minutes=10)

    plain = await store.next_queued(10, QueueOrder(now))
    # 1 per minute: the first low job is at -5 + 10 = 5, the next two at -5 + 9 = 4.
    aged = await store.next_queued(10, QueueOrder(now, aging_per_minute=1))
    head = await store.next_queued(2, QueueOrder(now, aging_per_minute=1))

    lows = [old_low.id, *(job.id for job in older_low)]
    highs = [fresh[1].id, fresh[0].id, fresh[2].id]
    assert [job.id for job in plain] == highs + lows
    assert [job.id for job in aged] == lows + highs
    assert [job.id for job in head] == [old_low.id, older_low[0].id]


async def test_next_queued_leaves_out_jobs_needing_more_lanes_than_can_work(
    store: JobStore,
) -> None:
    wide = [await add(store, priority=9, gpus=4) for _ in range(5)]
    narrow = await add(store, gpus=2)

    for aging in (0.0, 1.0):
        order = QueueOrder(T0, aging_per_minute=aging, max_gpus=2)
        assert [job.id for job in await store.next_queued(3, order)] == [narrow.id]
    assert len(await store.next_queued(3)) == 3
    assert wide[0].id == (await store.next_queued(1))[0].id


async def test_claim_starts_a_queued_job_once(store: JobStore) -> None:
    job = await add(store)
    later = T0 + timedelta(seconds=3)

    claimed = await store.claim(job.id, ("sim:1", "sim:2"), later)

    assert claimed is not None
    assert claimed.state is JobState.RUNNING
    assert (claimed.attempt, claimed.devices, claimed.started_at) == (1, ("sim:1", "sim:2"), later)
    assert await store.get(job.id) == claimed
    assert await store.claim(job.id, ("sim:0",), later) is None
    assert await store.count_queued() == 0


async def test_claim_returns_none_for_a_job_no_longer_queued(store: JobStore) -> None:
    job = await add(store)
    await store.cancel(job.id, T0)

    assert await store.claim(job.id, ("sim:0",), T0) is None
    with pytest.raises(JobNotFound):
        await store.claim("no-such-job", ("sim:0",), T0)


async def test_set_progress_only_while_running(store: JobStore) -> None:
    queued = await add(store)
    job = await running(store)

    await store.set_progress(job.id, Progress(2, 10, "image"))
    await store.set_progress(queued.id, Progress(1, 1, "image"))

    assert (await store.get(job.id)).progress == Progress(2, 10, "image")
    assert (await store.get(queued.id)).progress is None
    await store.finish(job.id, Outcome(JobState.SUCCEEDED), T0)
    await store.set_progress(job.id, Progress(9, 10, "image"))
    assert (await store.get(job.id)).progress == Progress(2, 10, "image")
    with pytest.raises(JobNotFound):
        await store.set_progress("no-such-job", Progress(1, 1, "image"))


async def test_finish_records_the_outcome_once(store: JobStore) -> None:
    job = await running(store)
    await store.set_progress(job.id, Progress(3, 4, "image"))
    done = T0 + timedelta(seconds=30)

    finished = await store.finish(job.id, Outcome(JobState.SUCCEEDED, result={"images": 4}), done)

    assert finished.state is JobState.SUCCEEDED
    assert (finished.result, finished.error, finished.finished_at) == ({"images": 4}, None, done)
    assert finished.progress == Progress(3, 4, "image")
    assert await store.get(job.id) == finished
    with pytest.raises(JobAlreadyFinished):
        await store.finish(job.id, Outcome(JobState.FAILED), done)
    assert await store.get(job.id) == finished


async def test_the_detail_of_an_outcome_is_kept_with_the_job_until_it_goes(
    store: JobStore,
) -> None:
    job = await running(store)
    plain = await running(store)
    body = b'{"images":[\n{"source":"a.jpg"}\n]}'

    await store.finish(job.id, Outcome(JobState.SUCCEEDED, kept_result=body), T0)
    await store.finish(plain.id, Outcome(JobState.SUCCEEDED), T0)

    assert await store.kept_result(job.id) == body
    assert await store.kept_result(plain.id) is None
    assert await store.kept_result("no-such-job") is None
    await store.delete(job.id)
    assert await store.kept_result(job.id) is None


async def test_finish_takes_the_outcome_progress(store: JobStore) -> None:
    job = await running(store)
    await store.set_progress(job.id, Progress(3, 4, "image"))

    finished = await store.finish(
        job.id, Outcome(JobState.CANCELLED, progress=Progress(4, 4, "image")), T0
    )

    assert finished.progress == Progress(4, 4, "image")


async def test_cancel_queued_running_and_finished_jobs(store: JobStore) -> None:
    queued = await add(store)
    job = await running(store)
    later = T0 + timedelta(seconds=5)

    cancelled = await store.cancel(queued.id, later)
    requested = await store.cancel(job.id, later)

    assert (cancelled.state, cancelled.cancel_requested) == (JobState.CANCELLED, True)
    assert cancelled.finished_at == later
    assert (requested.state, requested.cancel_requested) == (JobState.RUNNING, True)
    assert requested.finished_at is None
    assert await store.get(job.id) == requested
    with pytest.raises(JobAlreadyFinished):
        await store.cancel(queued.id, later)
    with pytest.raises(JobNotFound):
        await store.cancel("no-such-job", later)


async def finished(store: JobStore, at: datetime, **changes: Any) -> Job:
    job = await running(store, at, **changes)
    return await store.finish(job.id, Outcome(JobState.SUCCEEDED), at)


async def test_delete_forgets_a_finished_job_and_refuses_an_active_one(store: JobStore) -> None:
    queued = await add(store)
    active = await running(store)
    done = await finished(store, T0, idempotency_key="k1", request_fingerprint="f")

    assert await store.delete(done.id) == done
    with pytest.raises(JobNotFound):
        await store.get(done.id)
    for job in (queued, active):
        with pytest.raises(JobActive):
            await store.delete(job.id)
        assert (await store.get(job.id)).state is job.state
    with pytest.raises(JobNotFound):
        await store.delete(done.id)
    assert await store.counts() == {("queued", "inference"): 1, ("running", "inference"): 1}
    # The key is free again: a new request with it makes a new job.
    again = await add(store, idempotency_key="k1", request_fingerprint="other")
    assert again.id != done.id


async def test_unknown_names_the_ids_of_no_job(store: JobStore) -> None:
    queued = await add(store)
    done = await finished(store, T0)

    assert await store.unknown([queued.id, done.id, "gone", "never"]) == {"gone", "never"}
    await store.delete(done.id)
    assert await store.unknown([queued.id, done.id]) == {done.id}
    assert await store.unknown([]) == set()


async def test_expire_by_age_oldest_first_in_batches(store: JobStore) -> None:
    old = [await finished(store, T0 + timedelta(hours=hour)) for hour in (2, 0, 1)]
    recent = await finished(store, T0 + timedelta(days=3))
    queued = await add(store, T0 - timedelta(days=9))  # never finished: never expired
    cutoff = T0 + timedelta(days=1)

    first = await store.expire(finished_before=cutoff, keep=None, limit=2)
    rest = await store.expire(finished_before=cutoff, keep=None, limit=2)

    assert [job.id for job in first] == [old[1].id, old[2].id]
    assert [job.id for job in rest] == [old[0].id]
    assert await store.expire(finished_before=cutoff, keep=None, limit=2) == []
    page = await store.list_jobs(JobFilter(), limit=10, before_seq=None)
    assert {job.id for job in page.jobs} == {recent.id, queued.id}


async def test_expire_keeps_the_newest_finished_jobs(store: JobStore) -> None:
    jobs = [await finished(store, T0 + timedelta(minutes=n)) for n in range(5)]
    await running(store)
    await add(store)

    expired = await store.expire(finished_before=None, keep=2, limit=100)

    assert [job.id for job in expired] == [job.id for job in jobs[:3]]
    assert await store.expire(finished_before=None, keep=2, limit=100) == []
    assert await store.counts() == {
        ("succeeded", "inference"): 2,
        ("running", "inference"): 1,
        ("queued", "inference"): 1,
    }
    # Either rule expires a job: age takes the ones `keep` would have kept.
    both = await store.expire(finished_before=T0 + timedelta(minutes=4), keep=2, limit=100)
    assert [job.id for job in both] == [jobs[3].id]


async def test_recover_requeues_or_fails_interrupted_jobs(store: JobStore) -> None:
    first = await add(store)
    retried = await running(store, max_attempts=2)
    second = await add(store)
    exhausted = await running(store, max_attempts=1)
    done = await running(store)
    await store.finish(done.id, Outcome(JobState.SUCCEEDED), T0)
    crash = T0 + timedelta(hours=1)

    changed = await store.recover(crash)

    assert [job.id for job in changed] == [retried.id, exhausted.id]
    requeued, failed = changed
    assert (requeued.state, requeued.attempt, requeued.devices) == (JobState.QUEUED, 1, ())
    assert (failed.state, failed.attempt, failed.finished_at) == (JobState.FAILED, 1, crash)
    assert failed.error is not None
    assert failed.error.code == ErrorCode.INTERRUPTED
    assert [await store.get(job.id) for job in changed] == changed
    assert [job.id for job in await store.next_queued(limit=10)] == [
        first.id,
        retried.id,
        second.id,
    ]
    assert await store.get(first.id) == first
    assert (await store.get(done.id)).state is JobState.SUCCEEDED
    assert await store.recover(crash) == []


async def test_recover_gives_drained_jobs_their_attempt_back(store: JobStore) -> None:
    drained = await running(store, max_attempts=1)
    crashed = await running(store, max_attempts=1)

    changed = await store.recover(T0, drained=frozenset({drained.id}))

    by_id = {job.id: job for job in changed}
    assert (by_id[drained.id].state, by_id[drained.id].attempt) == (JobState.QUEUED, 0)
    assert by_id[crashed.id].state is JobState.FAILED
    assert await store.get(drained.id) == by_id[drained.id]


async def test_requeue_settles_one_lost_run_as_recovery_would(store: JobStore) -> None:
    lost = await running(store, max_attempts=2)
    other = await running(store, max_attempts=2)
    last_try = await running(store, max_attempts=1)

    requeued = await store.requeue(lost.id, T0)
    failed = await store.requeue(last_try.id, T0)

    assert (requeued.state, requeued.attempt, requeued.devices) == (JobState.QUEUED, 1, ())
    assert failed.state is JobState.FAILED
    assert failed.error is not None
    assert failed.error.code == ErrorCode.INTERRUPTED
    assert (await store.get(other.id)).state is JobState.RUNNING
    with pytest.raises(JobAlreadyFinished):
        await store.requeue(last_try.id, T0)


async def test_recent_durations_newest_first(store: JobStore) -> None:
    never_ran = await add(store)
    await store.cancel(never_ran.id, T0)
    for minute, seconds in enumerate((5, 1, 3)):
        job = await add(store)
        start = T0 + timedelta(minutes=minute)
        await store.claim(job.id, ("sim:0",), start)
        await store.finish(job.id, Outcome(JobState.SUCCEEDED), start + timedelta(seconds=seconds))
    still_running = await running(store)

    assert await store.recent_durations(10) == [3.0, 1.0, 5.0]
    assert await store.recent_durations(2) == [3.0, 1.0]
    assert still_running.finished_at is None


async def test_recent_durations_and_queued_count_of_one_kind(store: JobStore) -> None:
    for minute, (kind, seconds) in enumerate(
        [(JobKind.TRAINING, 600), (JobKind.INFERENCE, 2), (JobKind.TRAINING, 900)]
    ):
        job = await add(store, kind=kind)
        start = T0 + timedelta(minutes=minute)
        await store.claim(job.id, ("sim:0",), start)
        await store.finish(job.id, Outcome(JobState.SUCCEEDED), start + timedelta(seconds=seconds))
    for kind in (JobKind.TRAINING, JobKind.INFERENCE, JobKind.INFERENCE):
        await add(store, kind=kind)

    assert await store.recent_durations(10, JobKind.TRAINING) == [900.0, 600.0]
    assert await store.recent_durations(10, JobKind.INFERENCE) == [2.0]
    assert await store.recent_durations(10) == [900.0, 600.0, 2.0]
    assert await store.count_queued(JobKind.TRAINING) == 1
    assert await store.count_queued(JobKind.INFERENCE) == 2
    assert await store.count_queued() == 3


async def test_check_writable_passes_on_a_healthy_store(store: JobStore) -> None:
    await store.check_writable()


async def test_counts_per_state_and_kind(store: JobStore) -> None:
    await add(store)
    await add(store, kind=JobKind.TRAINING)
    done = await running(store)
    await store.finish(done.id, Outcome(JobState.FAILED), T0)
    assert await store.counts() == {
        ("queued", "inference"): 1,
        ("queued", "training"): 1,
        ("failed", "inference"): 1,
    }


async def test_counts_follow_every_transition(store: JobStore) -> None:
    cancelled = await add(store)
    await store.cancel(cancelled.id, T0)
    cancelling = await running(store, kind=JobKind.TRAINING)
    await store.cancel(cancelling.id, T0)  # ends cancelled on recovery
    succeeded = await running(store)
    await store.finish(succeeded.id, Outcome(JobState.SUCCEEDED), T0)
    await running(store, max_attempts=1)  # fails as interrupted on recovery
    await running(store, max_attempts=2)  # queued again on recovery
    await store.recover(T0)

    assert await store.counts() == {
        ("cancelled", "inference"): 1,
        ("cancelled", "training"): 1,
        ("succeeded", "inference"): 1,
        ("failed", "inference"): 1,
        ("queued", "inference"): 1,
    }
    assert await store.count_queued() == 1


async def test_count_queued_counts_every_kind_and_bounds_the_queue(store: JobStore) -> None:
    assert await store.count_queued() == 0
    await add(store)
    await add(store, kind=JobKind.TRAINING)
    await running(store)
    assert await store.count_queued() == 2
    with pytest.raises(QueueFull):
        await store.create(new_job(), max_queued=2, now=T0)
    await store.create(new_job(), max_queued=3, now=T0)
    assert await store.count_queued() == 3


@pytest.mark.parametrize(
    "where",
    [
        JobFilter(states=(JobState.SUCCEEDED,)),
        JobFilter(states=(JobState.QUEUED, JobState.FAILED)),
        JobFilter(kinds=(JobKind.TRAINING,)),
        JobFilter(states=(JobState.SUCCEEDED, JobState.RUNNING), kinds=(JobKind.INFERENCE,)),
        JobFilter(states=tuple(JobState), kinds=tuple(JobKind)),
    ],
    ids=["state", "states", "kind", "both", "all"],
)
async def test_filtered_pages_walk_every_match_newest_first(
    store: JobStore, where: JobFilter
) -> None:
    states = (JobState.SUCCEEDED, JobState.QUEUED, JobState.FAILED, JobState.RUNNING)
    jobs = []
    for i in range(23):
        job = await add(store, kind=JobKind.TRAINING if i % 4 == 0 else JobKind.INFERENCE)
        state = states[i * 7 % len(states)]
        if state is not JobState.QUEUED:
            await store.claim(job.id, ("sim:0",), T0)
        if state.is_terminal:
            await store.finish(job.id, Outcome(state), T0)
        jobs.append(await store.get(job.id))
    expected = [
        job.id
        for job in reversed(jobs)
        if (not where.states or job.state in where.states)
        and (not where.kinds or job.kind in where.kinds)
    ]

    seen: list[str] = []
    cursor = None
    for _ in range(len(jobs) + 1):
        page = await store.list_jobs(where, limit=3, before_seq=cursor)
        assert len(page.jobs) <= 3
        seen += [job.id for job in page.jobs]
        cursor = page.next_cursor
        if cursor is None:
            break

    assert seen == expected
    assert len(expected) > 3  # more than one page
    # the same filter with another limit (a statement built once takes each page's own)
    wider = await store.list_jobs(where, limit=5, before_seq=None)
    assert [job.id for job in wider.jobs] == expected[:5]


async def test_refusals_are_explained_key_first_then_model_then_bound(store: JobStore) -> None:
    first = await add(store, idempotency_key="key", request_fingerprint="fp")

    # The queue is full (1 of 1), yet a replay of the key still answers with its job.
    again, created = await store.create(
        new_job(idempotency_key="key", request_fingerprint="fp"), max_queued=1, now=T0
    )
    with pytest.raises(IdempotencyKeyReused):
        await store.create(
            new_job(idempotency_key="key", request_fingerprint="other"), max_queued=1, now=T0
        )
    with pytest.raises(ModelNotFound):
        await store.create(new_job(model_id="no-such-model"), max_queued=1, now=T0)
    with pytest.raises(QueueFull):
        await store.create(new_job(idempotency_key="new-key"), max_queued=1, now=T0)

    assert (again, created) == (first, False)
    assert len((await store.list_jobs(JobFilter(), limit=10, before_seq=None)).jobs) == 1


async def test_concurrent_creates_fill_the_queue_exactly(store: JobStore) -> None:
    results = await asyncio.gather(
        *(store.create(new_job(), max_queued=4, now=T0) for _ in range(10)),
        return_exceptions=True,
    )

    assert sum(isinstance(result, tuple) for result in results) == 4
    assert sum(isinstance(result, QueueFull) for result in results) == 6
    assert await store.count_queued() == 4


async def test_concurrent_writes_each_get_their_own_answer(store: JobStore) -> None:
    queued = await add(store)
    job = await running(store)
    done = await running(store)
    await store.finish(done.id, Outcome(JobState.SUCCEEDED), T0)

    results = await asyncio.gather(
        store.create(new_job(), max_queued=ROOMY, now=T0),
        store.finish(done.id, Outcome(JobState.FAILED), T0),
        store.claim(queued.id, ("sim:1",), T0),
        store.cancel(done.id, T0),
        store.set_progress(job.id, Progress(1, 2, "image")),
        store.finish(job.id, Outcome(JobState.SUCCEEDED, result={"images": 2}), T0),
        store.claim("no-such-job", ("sim:0",), T0),
        return_exceptions=True,
    )

    created, refinished, claimed, cancelled, progressed, finished, unknown = results
    assert isinstance(created, tuple)
    assert created[1]
    assert isinstance(refinished, JobAlreadyFinished)
    assert isinstance(claimed, Job)
    assert claimed.state is JobState.RUNNING
    assert isinstance(cancelled, JobAlreadyFinished)
    assert progressed is None
    assert isinstance(finished, Job)
    assert (finished.state, finished.progress) == (JobState.SUCCEEDED, Progress(1, 2, "image"))
    assert isinstance(unknown, JobNotFound)
    assert (await store.get(done.id)).state is JobState.SUCCEEDED
