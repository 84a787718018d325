"""Lanes and the dispatcher's admission rules, with a scripted executor and the in-memory store."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from pathlib import Path

import pytest

from tests.support.admission import Harness, ScriptedExecutor, dispatching, gate
from yolo_orch.dispatch.dispatcher import Dispatcher
from yolo_orch.dispatch.lanes import Lanes
from yolo_orch.domain import Job, JobKind, JobResult, JobState, NewJob, Progress, QueueOrder
from yolo_orch.errors import JobCancelled
from yolo_orch.files.jobfiles import JobFiles
from yolo_orch.ops.clock import utcnow
from yolo_orch.runners.base import RunContext
from yolo_orch.store.memory import InMemoryJobStore


async def test_try_admit_is_all_or_nothing_in_ascending_order() -> None:
    lanes = Lanes(["cuda:0", "cuda:1", "cuda:2"], slots_per_lane=1)
    first = await lanes.try_admit("a", 1)
    assert first is not None
    assert [lane.id for lane in first] == ["cuda:0"]
    assert await lanes.try_admit("b", 3) is None
    assert lanes.free_slots == 2  # the refused job took nothing
    pair = await lanes.try_admit("c", 2)
    assert pair is not None
    assert [lane.id for lane in pair] == ["cuda:1", "cuda:2"]
    lanes.release("a", first)
    lanes.release("c", pair)
    assert lanes.free_slots == 3


async def test_inference_takes_the_least_busy_lane() -> None:
    lanes = Lanes(["cuda:0", "cuda:1"], slots_per_lane=2)
    taken = [await lanes.try_admit(name, 1) for name in "abc"]
    assert [lane.id for admitted in taken if admitted for lane in admitted] == [
        "cuda:0",
        "cuda:1",
        "cuda:0",
    ]
    assert await lanes.try_admit("d", 1, reserved={"cuda:1"}) is None


async def test_fifo_within_priority_and_priority_first(tmp_path: Path) -> None:
    release, behaviour = gate()
    executor = ScriptedExecutor(slots=1, behaviour=behaviour)
    async with dispatching(tmp_path, 1, executor) as harness:
        blocker = await harness.submit()
        await harness.wait_running(blocker)
        low = [await harness.submit(priority=0) for _ in range(3)]
        high = await harness.submit(priority=5)
        await asyncio.sleep(0.05)
        release.set()
        await harness.all_terminal()
    assert executor.started == [blocker.id, high.id, *(job.id for job in low)]


async def test_multi_lane_job_is_not_starved_by_single_lane_jobs(tmp_path: Path) -> None:
    async def short(ctx: RunContext) -> JobResult:
        await asyncio.sleep(0.01)
        return JobResult(summary={})

    executor = ScriptedExecutor(slots=1, behaviour=short)
    async with dispatching(tmp_path, 2, executor) as harness:
        before = [await harness.submit() for _ in range(3)]
        wide = await harness.submit(gpus=2)
        after = [await harness.submit() for _ in range(20)]
        await harness.all_terminal()
    order = executor.started
    assert order.index(wide.id) < min(order.index(job.id) for job in after)
    assert executor.devices[wide.id] == ("sim:0", "sim:1")
    assert all(job.id in order for job in before)


async def test_multi_lane_jobs_never_deadlock(tmp_path: Path) -> None:
    executor = ScriptedExecutor(slots=1)
    rng = random.Random(7)
    async with dispatching(tmp_path, 4, executor) as harness:
        for _ in range(200):
            await harness.submit(gpus=rng.choice([1, 2, 3, 4]))
        jobs = await harness.all_terminal()
    assert {job.state for job in jobs} == {JobState.SUCCEEDED}
    for job in jobs:
        assert list(job.devices) == sorted(job.devices, key=lambda d: int(d.split(":")[1]))
        assert len(job.devices) == job.gpus


async def test_no_turn_leaks_after_many_jobs_with_failures_and_cancels(tmp_path: Path) -> None:
    rng = random.Random(1)

    async def chaotic(ctx: RunContext) -> JobResult:
        for step in range(3):
            if ctx.should_cancel():
                raise JobCancelled()
            ctx.report_progress(Progress(step, 3, "steps"))
            await asyncio.sleep(rng.choice([0, 0, 0.001]))
        roll = rng.random()
        if roll < 0.15:
            raise RuntimeError("boom")
        if roll < 0.25:
            raise RuntimeError("CUDA out of memory (test)")
        return JobResult(summary={"ok": True})

    executor = ScriptedExecutor(slots=2, behaviour=chaotic)
    async with dispatching(tmp_path, 3, executor, slots=2) as harness:
        submitted = []
        for _ in range(1000):
            submitted.append(await harness.submit(gpus=rng.choice([1, 1, 1, 2, 3])))
            if rng.random() < 0.2:
                victim = rng.choice(submitted)
                if not (await harness.store.get(victim.id)).state.is_terminal:
                    await harness.store.cancel(victim.id, utcnow())
                    harness.dispatcher.request_cancel(victim.id)
            if rng.random() < 0.1:
                await asyncio.sleep(0)
        jobs = await harness.all_terminal(deadline_s=60)
        states = Counter(job.state for job in jobs)
        assert states[JobState.SUCCEEDED] > 0
        assert states[JobState.FAILED] > 0
        assert states[JobState.CANCELLED] > 0
        codes = {job.error.code for job in jobs if job.error}
        assert codes == {"runtime_error", "cuda_oom"}
        await asyncio.sleep(0.01)
        assert harness.lanes.free_slots == harness.lanes.total_slots
        assert all(not lane.jobs for lane in harness.lanes)
        assert harness.dispatcher.running_jobs == []


async def test_a_store_failure_does_not_stop_the_dispatcher(tmp_path: Path) -> None:
    executor = ScriptedExecutor(slots=1)
    async with dispatching(tmp_path, 1, executor) as harness:
        real_next_queued = harness.store.next_queued
        calls = 0

        async def flaky(limit: int, order: QueueOrder | None = None) -> list[Job]:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise OSError("disk hiccup")
            return await real_next_queued(limit, order)

        harness.store.next_queued = flaky  # type: ignore[method-assign]
        harness.dispatcher._retry_delay_s = 0.01
        job = await harness.submit()
        jobs = await harness.all_terminal()
    assert jobs[0].id == job.id
    assert jobs[0].state is JobState.SUCCEEDED


@pytest.mark.parametrize("grace_s", [0.0, 0.2])
async def test_drain_leaves_unfinished_runs_running_for_recovery(
    tmp_path: Path, grace_s: float
) -> None:
    _, behaviour = gate()
    executor = ScriptedExecutor(slots=1, behaviour=behaviour)
    store = InMemoryJobStore()
    lanes = Lanes(["sim:0"], 1)
    dispatcher = Dispatcher(store, lanes, executor, JobFiles(tmp_path))
    task = asyncio.create_task(dispatcher.run())
    job, _ = await store.create(
        NewJob(kind=JobKind.INFERENCE, model="sim", spec={}), max_queued=10, now=utcnow()
    )
    dispatcher.wake()
    await Harness(store, lanes, dispatcher).wait_running(job)
    await dispatcher.drain(grace_s)
    await task
    assert (await store.get(job.id)).state is JobState.RUNNING
    assert dispatcher.abandoned == 1
    assert lanes.free_slots == 1
    recovered = await dispatcher.recover()
    assert [(j.id, j.state) for j in recovered] == [(job.id, JobState.QUEUED)]


async def test_jobs_left_by_a_drain_are_not_crash_suspects(tmp_path: Path) -> None:
    """After a crash, the jobs found running run alone once; after a graceful stop they need
    not: both lanes fill again at once."""
    _, behaviour = gate()
    store = InMemoryJobStore()
    files = JobFiles(tmp_path)
    first = Dispatcher(store, Lanes(["sim:0", "sim:1"], 1), ScriptedExecutor(1, behaviour), files)
    task = asyncio.create_task(first.run())
    harness = Harness(store, Lanes(["sim:0", "sim:1"], 1), first)
    jobs = [await harness.submit() for _ in range(2)]
    for job in jobs:
        await harness.wait_running(job)
    await first.drain(grace_s=0)
    await task

    release, behaviour = gate()
    lanes = Lanes(["sim:0", "sim:1"], 1)
    second = Dispatcher(store, lanes, ScriptedExecutor(1, behaviour), files)
    await second.recover()
    task = asyncio.create_task(second.run())
    for job in jobs:
        await Harness(store, lanes, second).wait_running(job)
    assert sorted(second.running_jobs) == sorted(job.id for job in jobs)
    release.set()
    await second.drain(grace_s=5)
    await task


async def test_runs_that_went_on_without_the_server_are_followed_not_requeued(
    tmp_path: Path,
) -> None:
    """On a cluster a run outlives a crashed server: the next one takes its lanes back, follows
    it in the same attempt and releases it once its outcome is committed; a run that did not
    survive is requeued as ever."""
    store = InMemoryJobStore()
    survivor, lost = [
        (await store.create(new, max_queued=10, now=utcnow()))[0]
        for new in (NewJob(kind=JobKind.INFERENCE, model="sim", spec={}) for _ in "ab")
    ]
    await store.claim(survivor.id, ("sim:1",), utcnow())
    await store.claim(lost.id, ("sim:0",), utcnow())
    await store.cancel(survivor.id, utcnow())  # asked before the crash: still asked after

    seen: list[tuple[str, int, tuple[str, ...], bool]] = []

    async def behaviour(ctx: RunContext) -> JobResult:
        seen.append((ctx.job.id, ctx.job.attempt, ctx.devices, ctx.should_cancel()))
        return JobResult(summary={})

    executor = ScriptedExecutor(slots=1, behaviour=behaviour)
    executor.survivors = {survivor.id}
    lanes = Lanes(["sim:0", "sim:1"], 1)
    dispatcher = Dispatcher(store, lanes, executor, JobFiles(tmp_path))
    recovered = await dispatcher.recover()
    assert [(job.id, job.state) for job in recovered] == [(lost.id, JobState.QUEUED)]
    assert survivor.id in dispatcher.running_jobs
    task = asyncio.create_task(dispatcher.run())
    harness = Harness(store, lanes, dispatcher)
    jobs = {job.id: job for job in await harness.all_terminal()}
    await dispatcher.drain(grace_s=5)
    await task

    assert seen[0] == (survivor.id, 1, ("sim:1",), True)
    assert (seen[1][0], seen[1][1]) == (lost.id, 2)
    assert (jobs[survivor.id].state, jobs[survivor.id].attempt) == (JobState.SUCCEEDED, 1)
    assert sorted(executor.released) == sorted([survivor.id, lost.id])
    assert lanes.free_slots == 2
