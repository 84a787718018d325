"""Runs that start while their claims are still being committed (`Executor.starts_unclaimed`):
a cancel that wins the race stops the run and leaves the job cancelled, and a crash before the
claim landed still counts the attempt (`StartJournal`)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path

import pytest

from tests.support.admission import Harness, ScriptedExecutor
from tests.support.start_journal import context
from yolo_orch.dispatch.dispatcher import Dispatcher
from yolo_orch.dispatch.lanes import Lanes
from yolo_orch.domain import Job, JobError, JobKind, JobResult, JobState, NewJob, QueueOrder
from yolo_orch.errors import ErrorCode, JobCancelled
from yolo_orch.files.jobfiles import JobFiles
from yolo_orch.ops.clock import utcnow
from yolo_orch.runners.base import RunContext
from yolo_orch.store.memory import InMemoryJobStore


class HeldClaims(InMemoryJobStore):
    """Claims wait until `open` is set, as behind a busy writer."""

    def __init__(self) -> None:
        super().__init__()
        self.open = asyncio.Event()

    async def claim(
        self, job_id: str, devices: tuple[str, ...], now: datetime, model_id: str | None = None
    ) -> Job | None:
        await self.open.wait()
        return await super().claim(job_id, devices, now, model_id)


async def test_a_run_starts_before_its_claim_and_a_cancel_meanwhile_stops_it(
    tmp_path: Path,
) -> None:
    seen: list[tuple[str, int, JobState]] = []

    async def behaviour(ctx: RunContext) -> JobResult:
        seen.append((ctx.job.id, ctx.job.attempt, ctx.job.state))
        while not ctx.should_cancel() and ctx.job.id == first.id:
            await asyncio.sleep(0.001)
        if ctx.should_cancel():
            raise JobCancelled()
        return JobResult(summary={})

    store = HeldClaims()
    executor = ScriptedExecutor(1, behaviour, starts_unclaimed=True)
    lanes = Lanes(["sim:0"], 1)
    dispatcher = Dispatcher(store, lanes, executor, JobFiles(tmp_path), progress_interval_s=0)
    harness = Harness(store, lanes, dispatcher)
    task = asyncio.create_task(dispatcher.run())
    first = await harness.submit()
    async with asyncio.timeout(5):
        while not seen:
            await asyncio.sleep(0.001)
    assert seen == [(first.id, 1, JobState.RUNNING)]  # the run has the job as its claim makes it
    assert (await store.get(first.id)).state is JobState.QUEUED  # not committed yet
    await store.cancel(first.id, utcnow())
    second = await harness.submit()
    store.open.set()
    jobs = {job.id: job for job in await harness.all_terminal()}
    await dispatcher.drain(grace_s=5)
    await task

    assert (jobs[first.id].state, jobs[first.id].attempt) == (JobState.CANCELLED, 0)
    assert (jobs[second.id].state, jobs[second.id].attempt) == (JobState.SUCCEEDED, 1)
    assert [job_id for job_id, _, _ in seen] == [first.id, second.id]
    assert lanes.free_slots == 1
    # what the executor keeps of the stopped run is let go (on a cluster: the actor's copy)
    assert first.id in executor.released


async def test_a_crash_before_the_claim_landed_counts_the_attempt_and_makes_a_suspect(
    tmp_path: Path,
) -> None:
    store = InMemoryJobStore()
    files = JobFiles(tmp_path)
    started, again, stale = [
        (await store.create(new, max_queued=10, now=utcnow()))[0]
        for new in (
            NewJob(kind=JobKind.INFERENCE, model="sim", spec={}, max_attempts=attempts)
            for attempts in (3, 1, 3)
        )
    ]
    # What the threads noted before the crash: `started` and `again` in their first attempts,
    # and `stale` in an attempt its store record does not follow.
    files.starts.note(
        [context(started.id, 1), context(again.id, 1, ("sim:1",)), context(stale.id, 3)]
    )
    release = asyncio.Event()
    order: list[str] = []

    async def behaviour(ctx: RunContext) -> JobResult:
        order.append(ctx.job.id)
        await release.wait()
        return JobResult(summary={})

    lanes = Lanes(["sim:0", "sim:1"], 1)
    dispatcher = Dispatcher(store, lanes, ScriptedExecutor(1, behaviour), files)
    recovered = {job.id: job for job in await dispatcher.recover()}
    assert (recovered[started.id].state, recovered[started.id].attempt) == (JobState.QUEUED, 1)
    failed = recovered[again.id]
    assert (failed.state, failed.attempt, failed.devices) == (JobState.FAILED, 1, ("sim:1",))
    assert isinstance(failed.error, JobError)
    assert failed.error.code is ErrorCode.INTERRUPTED
    assert stale.id not in recovered
    assert files.starts.read() == []  # cleared once the recovery completed its claims

    task = asyncio.create_task(dispatcher.run())
    harness = Harness(store, lanes, dispatcher)
    await harness.wait_running(started)
    await asyncio.sleep(0.05)
    assert order == [started.id]  # a suspect runs alone: `stale` waits though a lane is free
    release.set()
    jobs = {job.id: job for job in await harness.all_terminal()}
    await dispatcher.drain(grace_s=5)
    await task
    assert (jobs[started.id].state, jobs[started.id].attempt) == (JobState.SUCCEEDED, 2)
    assert (jobs[stale.id].state, jobs[stale.id].attempt) == (JobState.SUCCEEDED, 1)


async def started_unclaimed(store: InMemoryJobStore, files: JobFiles) -> Job:
    """A queued job whose first attempt's start the journal noted, its claim not committed."""
    new = NewJob(kind=JobKind.INFERENCE, model="sim", spec={}, max_attempts=3)
    job = (await store.create(new, max_queued=10, now=utcnow()))[0]
    files.starts.note([context(job.id, 1)])
    return job


async def test_a_cluster_run_started_before_its_claim_landed_is_followed_after_a_crash(
    tmp_path: Path,
) -> None:
    store = InMemoryJobStore()
    files = JobFiles(tmp_path)
    job = await started_unclaimed(store, files)  # its task left; the server died before the claim
    executor = ScriptedExecutor(1, starts_unclaimed=True)
    executor.survivors = {job.id}  # its actor still holds attempt 1
    lanes = Lanes(["sim:0"], 1)
    dispatcher = Dispatcher(store, lanes, executor, files)
    assert await dispatcher.recover() == []  # neither requeued nor failed: followed
    assert (await store.get(job.id)).state is JobState.RUNNING
    task = asyncio.create_task(dispatcher.run())
    [ended] = await Harness(store, lanes, dispatcher).all_terminal()
    await dispatcher.drain(grace_s=5)
    await task
    assert (ended.state, ended.attempt) == (JobState.SUCCEEDED, 1)  # one attempt, not two
    assert executor.started == [job.id]


class FailingClaims(InMemoryJobStore):
    async def claim(
        self, job_id: str, devices: tuple[str, ...], now: datetime, model_id: str | None = None
    ) -> Job | None:
        raise RuntimeError("the process died here")


async def test_a_crash_while_the_journals_claims_are_completed_leaves_the_journal(
    tmp_path: Path,
) -> None:
    store = FailingClaims()
    files = JobFiles(tmp_path)
    job = await started_unclaimed(store, files)
    dispatcher = Dispatcher(store, Lanes(["sim:0"], 1), ScriptedExecutor(1), files)
    with pytest.raises(RuntimeError, match="died here"):
        await dispatcher.recover()
    assert [entry.job_id for entry in files.starts.read()] == [job.id]  # for the next start


class LaggingReads(InMemoryJobStore):
    """A claim commits `claim_s` after it was asked for, as behind a busy writer; a read
    answers `lag_s` after it looked, as on a busy thread."""

    claim_s = 0.005
    lag_s = 0.02

    async def claim(
        self, job_id: str, devices: tuple[str, ...], now: datetime, model_id: str | None = None
    ) -> Job | None:
        await asyncio.sleep(self.claim_s)
        return await super().claim(job_id, devices, now, model_id)

    async def next_queued(self, limit: int, order: QueueOrder | None = None) -> list[Job]:
        jobs = await super().next_queued(limit, order)
        await asyncio.sleep(self.lag_s)
        return jobs


async def test_a_job_that_ran_while_a_read_looked_is_never_started_again(
    tmp_path: Path,
) -> None:
    """Runs start before their claims commit; a read that looked before a claim committed and
    answered after that job had run and ended still showed it queued."""
    store = LaggingReads()
    executor = ScriptedExecutor(1, starts_unclaimed=True)
    lanes = Lanes(["sim:0", "sim:1"], 1)
    dispatcher = Dispatcher(store, lanes, executor, JobFiles(tmp_path), progress_interval_s=0)
    harness = Harness(store, lanes, dispatcher)
    for _ in range(120):  # several reads' worth: most passes take from a read held
        await harness.submit()
    task = asyncio.create_task(dispatcher.run())
    jobs = await harness.all_terminal()
    await dispatcher.drain(grace_s=5)
    await task

    assert {job.state for job in jobs} == {JobState.SUCCEEDED}
    assert sorted(executor.started) == sorted(job.id for job in jobs)  # each ran once
