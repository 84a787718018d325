"""Fair, unstalled queueing: jobs that cannot run never hide runnable ones, drains cost no
attempt, and aging lets a low-priority job past a stream of higher ones."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support.admission import Harness, ScriptedExecutor, dispatching, gate
from yolo_orch.dispatch.dispatcher import Dispatcher
from yolo_orch.dispatch.lanes import Lanes
from yolo_orch.domain import JobKind, JobState, NewJob
from yolo_orch.files.jobfiles import JobFiles
from yolo_orch.ops.clock import utcnow
from yolo_orch.store.memory import InMemoryJobStore


async def test_jobs_needing_more_lanes_than_are_healthy_never_hide_runnable_ones(
    tmp_path: Path,
) -> None:
    executor = ScriptedExecutor(slots=1)
    async with dispatching(tmp_path, 3, executor) as harness:
        lanes = list(harness.lanes)
        lanes[1].healthy = False
        lanes[2].wedged = True
        wide = [await harness.submit(gpus=2, priority=9) for _ in range(50)]  # > any window
        narrow = await harness.submit(gpus=1)
        async with asyncio.timeout(10):
            while (await harness.store.get(narrow.id)).state is not JobState.SUCCEEDED:
                await asyncio.sleep(0.002)
        assert executor.devices[narrow.id] == ("sim:0",)
        states = {job.id: job.state for job in harness.store.jobs}
        assert {states[job.id] for job in wide} == {JobState.QUEUED}


async def test_a_drained_job_does_not_use_up_its_attempts(tmp_path: Path) -> None:
    store = InMemoryJobStore()
    files = JobFiles(tmp_path)
    new = NewJob(kind=JobKind.TRAINING, model="sim", spec={}, max_attempts=1)
    job, _ = await store.create(new, max_queued=10, now=utcnow())
    for _ in range(3):  # three deploys, each one draining the run
        _, behaviour = gate()
        lanes = Lanes(["sim:0"], 1)
        dispatcher = Dispatcher(store, lanes, ScriptedExecutor(1, behaviour), files)
        await dispatcher.recover()
        task = asyncio.create_task(dispatcher.run())
        await Harness(store, lanes, dispatcher).wait_running(job)
        await dispatcher.drain(grace_s=0)
        await task
    lanes = Lanes(["sim:0"], 1)
    dispatcher = Dispatcher(store, lanes, ScriptedExecutor(1), files)
    await dispatcher.recover()
    task = asyncio.create_task(dispatcher.run())
    harness = Harness(store, lanes, dispatcher)
    finished = (await harness.all_terminal())[0]
    await dispatcher.drain(grace_s=5)
    await task
    assert (finished.state, finished.attempt) == (JobState.SUCCEEDED, 1)


async def test_a_crashed_job_still_uses_up_its_attempts(tmp_path: Path) -> None:
    store = InMemoryJobStore()
    new = NewJob(kind=JobKind.TRAINING, model="sim", spec={}, max_attempts=1)
    job, _ = await store.create(new, max_queued=10, now=utcnow())
    await store.claim(job.id, ("sim:0",), utcnow())
    dispatcher = Dispatcher(store, Lanes(["sim:0"], 1), ScriptedExecutor(1), JobFiles(tmp_path))
    await dispatcher.recover()  # no drain noted it: the server died with it running
    assert (await store.get(job.id)).state is JobState.FAILED
