"""A dispatcher over a scripted executor, for the tests of admission, run limits and unclaimed
starts."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from yolo_orch.dispatch.dispatcher import Dispatcher
from yolo_orch.dispatch.lanes import Lanes
from yolo_orch.domain import Job, JobKind, JobResult, JobState, NewJob
from yolo_orch.files.jobfiles import JobFiles
from yolo_orch.ops.clock import utcnow
from yolo_orch.runners.base import RunContext
from yolo_orch.store.memory import InMemoryJobStore

Behaviour = Callable[[RunContext], Awaitable[JobResult]]


async def quick(ctx: RunContext) -> JobResult:
    await asyncio.sleep(0.001)
    return JobResult(summary={})


class ScriptedExecutor:
    """Runs each job as a coroutine and checks that no lane ever runs more than its slots."""

    def __init__(
        self, slots: int, behaviour: Behaviour = quick, *, starts_unclaimed: bool = False
    ) -> None:
        self.starts_unclaimed = starts_unclaimed
        self.slots = slots
        self.behaviour = behaviour
        self.active: Counter[str] = Counter()
        self.started: list[str] = []
        self.devices: dict[str, tuple[str, ...]] = {}
        self.survivors: set[str] = set()
        """Jobs whose runs went on without the last server (as on a cluster)."""
        self.released: list[str] = []

    async def run(self, ctx: RunContext) -> JobResult:
        for device in ctx.devices:
            self.active[device] += 1
            assert self.active[device] <= self.slots, f"{device} over its slots"
        self.started.append(ctx.job.id)
        self.devices[ctx.job.id] = ctx.devices
        try:
            return await self.behaviour(ctx)
        finally:
            for device in ctx.devices:
                self.active[device] -= 1

    async def surviving(self, jobs: Sequence[Job]) -> set[str]:
        return {job.id for job in jobs} & self.survivors

    async def release(self, job_id: str) -> None:
        self.released.append(job_id)


class Harness:
    def __init__(self, store: InMemoryJobStore, lanes: Lanes, dispatcher: Dispatcher) -> None:
        self.store = store
        self.lanes = lanes
        self.dispatcher = dispatcher

    async def submit(self, gpus: int = 1, priority: int = 0) -> Job:
        kind = JobKind.TRAINING if gpus > 1 else JobKind.INFERENCE
        new = NewJob(kind=kind, model="sim", spec={}, priority=priority, gpus=gpus)
        job, _ = await self.store.create(new, max_queued=10_000, now=utcnow())
        self.dispatcher.wake()
        return job

    async def wait_running(self, job: Job) -> None:
        async with asyncio.timeout(5):
            while (await self.store.get(job.id)).state is not JobState.RUNNING:
                await asyncio.sleep(0.001)

    async def all_terminal(self, deadline_s: float = 20) -> list[Job]:
        async with asyncio.timeout(deadline_s):
            while any(not job.state.is_terminal for job in self.store.jobs):
                await asyncio.sleep(0.005)
        return self.store.jobs


@asynccontextmanager
async def dispatching(
    tmp_path: Path, lane_count: int, executor: ScriptedExecutor, slots: int = 1
) -> AsyncIterator[Harness]:
    store = InMemoryJobStore()
    lanes = Lanes([f"sim:{i}" for i in range(lane_count)], slots)
    dispatcher = Dispatcher(store, lanes, executor, JobFiles(tmp_path), progress_interval_s=0)
    task = asyncio.create_task(dispatcher.run())
    try:
        yield Harness(store, lanes, dispatcher)
    finally:
        await dispatcher.drain(grace_s=5)
        await task


def gate() -> tuple[asyncio.Event, Behaviour]:
    """A behaviour whose runs all wait until the returned event is set."""
    release = asyncio.Event()

    async def behaviour(ctx: RunContext) -> JobResult:
        await release.wait()
        return JobResult(summary={})

    return release, behaviour
