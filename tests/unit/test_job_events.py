"""Those waiting on a job hear of each change with the job as it left it, where the store
returned it, so that a `Prefer: wait` costs no read per change."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from yolo_orch.domain import JobKind, JobState, NewJob, Outcome, Progress
from yolo_orch.jobs.notifications import Change, JobEvents, PublishingJobStore
from yolo_orch.store.memory import InMemoryJobStore

T0 = datetime(2025, 1, 2, tzinfo=UTC)


def publishing() -> tuple[PublishingJobStore, JobEvents]:
    events = JobEvents()
    return PublishingJobStore(InMemoryJobStore(), events), events


async def queued(store: PublishingJobStore) -> str:
    new = NewJob(kind=JobKind.INFERENCE, model="sim", spec={"inputs": ["a"], "params": {}})
    job, _ = await store.create(new, max_queued=10, now=T0)
    return job.id


async def waiting_on_a_running_job() -> tuple[
    PublishingJobStore, JobEvents, str, asyncio.Task[Change | None]
]:
    store, events = publishing()
    job_id = await queued(store)
    await store.claim(job_id, ("sim:0",), T0)
    waiting = asyncio.create_task(events.next_change(job_id, events.version(job_id), 5))
    await asyncio.sleep(0)  # it waits
    return store, events, job_id, waiting


async def test_a_waiter_hears_of_the_finish_with_the_finished_job() -> None:
    store, events, job_id, waiting = await waiting_on_a_running_job()

    finished = await store.finish(job_id, Outcome(JobState.SUCCEEDED, result={"n": 1}), T0)
    change = await waiting

    assert change is not None
    assert change.job == finished
    assert change.version == events.version(job_id)


async def test_a_progress_write_says_only_the_progress_changed() -> None:
    store, _, job_id, waiting = await waiting_on_a_running_job()

    await store.set_progress(job_id, Progress(1, 2, "images"))
    change = await waiting

    assert change is not None
    assert change.progress_only
    assert change.job is None


async def test_a_change_before_the_wait_comes_without_the_job_and_a_quiet_one_times_out() -> None:
    store, events = publishing()
    job_id = await queued(store)
    seen = events.version(job_id)
    await store.claim(job_id, ("sim:0",), T0)

    missed = await events.next_change(job_id, seen, 5)
    quiet = await events.next_change(job_id, events.version(job_id), 0.01)

    assert missed is not None
    assert missed.job is None  # read it
    assert not missed.progress_only
    assert quiet is None
