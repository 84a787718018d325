"""The dispatcher's watchdog: time limits, stalled progress and wedged lanes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.support.admission import Behaviour, Harness, ScriptedExecutor
from yolo_orch.dispatch.dispatcher import Dispatcher
from yolo_orch.dispatch.lanes import Lanes
from yolo_orch.dispatch.run_limits import RunLimits
from yolo_orch.domain import Job, JobKind, JobResult, JobState, NewJob, Progress
from yolo_orch.errors import ErrorCode, JobCancelled
from yolo_orch.files.jobfiles import JobFiles
from yolo_orch.ops.clock import utcnow
from yolo_orch.params.common import MAX_TIMEOUT_S, JobParams
from yolo_orch.params.export import ExportParams
from yolo_orch.params.inference import InferenceParams
from yolo_orch.params.training import TrainingParams
from yolo_orch.params.validation import ValidationParams
from yolo_orch.runners.base import RunContext
from yolo_orch.store.memory import InMemoryJobStore


async def busy_until_cancelled(ctx: RunContext) -> JobResult:
    """Reports ever-new progress, so it never stalls, and stops only when told to."""
    step = 0
    while not ctx.should_cancel():
        step += 1
        ctx.report_progress(Progress(step, 10**9, "steps"))
        await asyncio.sleep(0.001)
    raise JobCancelled()


async def silent_until_cancelled(ctx: RunContext) -> JobResult:
    ctx.report_progress(Progress(1, 10, "steps"))
    while not ctx.should_cancel():
        await asyncio.sleep(0.001)
    raise JobCancelled()


@asynccontextmanager
async def watched(
    tmp_path: Path, behaviour: Behaviour, limits: RunLimits, lane_count: int = 1
) -> AsyncIterator[Harness]:
    store = InMemoryJobStore()
    lanes = Lanes([f"sim:{i}" for i in range(lane_count)], 1)
    executor = ScriptedExecutor(1, behaviour)
    dispatcher = Dispatcher(
        store, lanes, executor, JobFiles(tmp_path), progress_interval_s=0, limits=limits
    )
    task = asyncio.create_task(dispatcher.run())
    try:
        yield Harness(store, lanes, dispatcher)
    finally:
        await dispatcher.drain(grace_s=5)
        await task


async def submit(harness: Harness, **params: object) -> Job:
    new = NewJob(kind=JobKind.INFERENCE, model="sim", spec={"params": params})
    job, _ = await harness.store.create(new, max_queued=100, now=utcnow())
    harness.dispatcher.wake()
    return job


async def finished(harness: Harness, job: Job) -> Job:
    async with asyncio.timeout(10):
        while not (job := await harness.store.get(job.id)).state.is_terminal:
            await asyncio.sleep(0.002)
    return job


def fast(
    *, timeout_s: dict[str, float] | None = None, stall_after_s: float = 0, wedge_grace_s: float = 5
) -> RunLimits:
    return RunLimits(timeout_s or {}, stall_after_s, wedge_grace_s, check_interval_s=0.005)


async def test_a_job_past_its_kinds_time_limit_fails_timeout(tmp_path: Path) -> None:
    async with watched(tmp_path, busy_until_cancelled, fast(timeout_s={"inference": 0.05})) as h:
        job = await finished(h, await submit(h))
    assert job.state is JobState.FAILED
    assert job.error is not None
    assert job.error.code == ErrorCode.TIMEOUT
    assert "0.05s" in job.error.message


async def test_a_jobs_own_timeout_overrides_its_kinds(tmp_path: Path) -> None:
    limits = fast(timeout_s={"inference": 3600})
    async with watched(tmp_path, busy_until_cancelled, limits) as h:
        job = await finished(h, await submit(h, timeout_s=0.05))
    assert job.error is not None
    assert job.error.code == ErrorCode.TIMEOUT


async def test_timeout_zero_means_no_limit(tmp_path: Path) -> None:
    limits = fast(timeout_s={"inference": 0.01})
    async with watched(tmp_path, busy_until_cancelled, limits) as h:
        job = await submit(h, timeout_s=0)
        await h.wait_running(job)
        await asyncio.sleep(0.1)  # well past the kind's limit, which the job turned off
        assert (await h.store.get(job.id)).state is JobState.RUNNING
        await h.store.cancel(job.id, utcnow())
        h.dispatcher.request_cancel(job.id)
        assert (await finished(h, job)).state is JobState.CANCELLED


async def test_a_job_whose_progress_stands_still_fails_stalled(tmp_path: Path) -> None:
    async with watched(tmp_path, silent_until_cancelled, fast(stall_after_s=0.05)) as h:
        job = await finished(h, await submit(h))
    assert job.state is JobState.FAILED
    assert job.error is not None
    assert job.error.code == ErrorCode.STALLED


async def test_moving_progress_is_not_a_stall(tmp_path: Path) -> None:
    limits = fast(stall_after_s=0.2, timeout_s={"inference": 1.0})
    async with watched(tmp_path, busy_until_cancelled, limits) as h:
        job = await finished(h, await submit(h))
    assert job.error is not None
    assert job.error.code == ErrorCode.TIMEOUT  # the limit caught it, not the stall check


async def test_a_run_that_ignores_the_stop_wedges_its_lane_and_asks_for_a_restart(
    tmp_path: Path,
) -> None:
    release = asyncio.Event()

    async def deaf(ctx: RunContext) -> JobResult:
        if ctx.job.params.get("deaf"):
            await asyncio.Event().wait()  # never returns, whatever it is told
        await release.wait()
        return JobResult(summary={})

    limits = fast(timeout_s={"inference": 0.05}, wedge_grace_s=0.05)
    async with watched(tmp_path, deaf, limits, lane_count=2) as h:
        other = await submit(h, timeout_s=0)
        await h.wait_running(other)
        stuck = await submit(h, deaf=True)
        stuck = await finished(h, stuck)
        assert stuck.state is JobState.FAILED
        assert stuck.error is not None
        assert stuck.error.code == ErrorCode.TIMEOUT
        wedged = [lane.id for lane in h.lanes if lane.wedged]
        assert wedged == list(stuck.devices)
        later = await submit(h)
        assert not h.dispatcher.wedged.is_set()  # the other job still runs
        release.set()
        await finished(h, other)
        async with asyncio.timeout(10):
            await h.dispatcher.wedged.wait()
        assert (await h.store.get(later.id)).state is JobState.QUEUED  # for the next process


@pytest.mark.parametrize(
    "params", [InferenceParams, TrainingParams, ValidationParams, ExportParams]
)
def test_timeout_s_is_range_checked_in_every_kinds_params(params: type[JobParams]) -> None:
    assert "timeout_s" in params.model_fields
    for bad in (-1, MAX_TIMEOUT_S + 1):
        with pytest.raises(ValidationError, match="timeout_s"):
            params.model_validate({"timeout_s": bad})
