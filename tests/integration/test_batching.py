"""Cross-job batching on the simulated runtime: which jobs share a forward pass (asserted on the
runtime's batch record, never on timing), and that each job of a batch keeps its own fate."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
import pytest

from tests.conftest import serve, sim_job, wait_terminal
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.dispatch.batching import BatchPolicy, companions
from yolo_orch.domain import Job, JobKind, JobState, QueueOrder
from yolo_orch.ops.clock import utcnow
from yolo_orch.runners.base import BatchRecord
from yolo_orch.runners.simulated import SimulatedRuntime


@dataclass
class Batching:
    client: httpx.AsyncClient
    runtime: SimulatedRuntime

    async def submit(self, **fields: Any) -> str:
        response = await self.client.post("/v1/jobs", json=sim_job(**fields))
        assert response.status_code == 202, response.text
        return str(response.json()["id"])

    async def block_lane(self) -> str:
        """A job of its own params holding the one lane until `release` cancels it."""
        job_id = await self.submit(params={"imgsz": 32, "sim_seconds": 60, "sim_steps": 6000})
        async with asyncio.timeout(10):
            while (await self.client.get(f"/v1/jobs/{job_id}")).json()["state"] != "running":
                await asyncio.sleep(0.01)
        return job_id

    async def release(self, blocker: str) -> None:
        assert (await self.client.post(f"/v1/jobs/{blocker}/cancel")).status_code == 202

    async def ended(self, *job_ids: str) -> dict[str, dict[str, Any]]:
        return {job_id: await wait_terminal(self.client, job_id) for job_id in job_ids}

    def passes(self, *, ran: bool = True) -> list[set[str]]:
        return [set(record.job_ids) for record in self.runtime.batches if record.ran is ran]


@pytest.fixture
def batching_factory(
    settings_factory: Callable[..., Settings],
) -> Callable[..., BatchingServer]:
    def make(**overrides: Any) -> BatchingServer:
        return BatchingServer(settings_factory(sim_lanes=1, **overrides))

    return make


class BatchingServer:
    """The app on one simulated lane whose batch record the test reads."""

    def __init__(self, settings: Settings) -> None:
        self._runtime = SimulatedRuntime(1)
        self._serve = serve(create_app(settings, runtime=self._runtime))

    async def __aenter__(self) -> Batching:
        return Batching(await self._serve.__aenter__(), self._runtime)

    async def __aexit__(self, *exc: object) -> None:
        await self._serve.__aexit__(*exc)


@pytest.fixture
async def batched(
    batching_factory: Callable[..., BatchingServer],
) -> AsyncIterator[Batching]:
    async with batching_factory(batch_max_images={"sim": 8}) as b:
        yield b


async def test_queued_jobs_of_one_model_and_params_share_a_forward_pass(
    batched: Batching,
) -> None:
    blocker = await batched.block_lane()
    # timeout_s is each job's own: it does not keep jobs apart
    jobs = [await batched.submit(params={"timeout_s": 100 + i}) for i in range(3)]
    await batched.release(blocker)
    ended = await batched.ended(*jobs)
    assert {job["state"] for job in ended.values()} == {"succeeded"}
    assert batched.passes() == [set(jobs)]
    devices = (await batched.client.get("/v1/devices")).json()["devices"][0]
    assert devices["batch_sizes"] == {"1": 1, "3": 1}  # the blocker ran alone
    metrics = (await batched.client.get("/metrics")).text
    assert 'yolo_orch_batch_jobs_bucket{lane="sim:0",le="4.0"} 2.0' in metrics
    assert "yolo_orch_batch_wait_seconds_count" in metrics


async def test_different_forward_pass_params_never_share(batched: Batching) -> None:
    blocker = await batched.block_lane()
    small = [await batched.submit(params={"imgsz": 320}) for _ in range(2)]
    confident = [await batched.submit(params={"imgsz": 320, "conf": 0.5}) for _ in range(2)]
    half = [await batched.submit(params={"imgsz": 320, "half": True}) for _ in range(2)]
    await batched.release(blocker)
    await batched.ended(*small, *confident, *half)
    assert sorted(batched.passes(), key=sorted) == sorted(
        [set(small), set(confident), set(half)], key=sorted
    )


async def test_batches_hold_at_most_batch_max_images(
    batching_factory: Callable[..., BatchingServer],
) -> None:
    async with batching_factory(batch_max_images={"sim": 4}) as b:
        blocker = await b.block_lane()
        three = await b.submit(inputs=["a.jpg", "b.jpg", "c.jpg"])
        two = await b.submit(inputs=["d.jpg", "e.jpg"])
        one = await b.submit(inputs=["f.jpg"])
        await b.release(blocker)
        await b.ended(three, two, one)
        # `two` does not fit beside `three`; `one` does, and has the same priority as `two`
        assert b.passes() == [{three, one}]
        assert [record.images for record in b.runtime.batches] == [4]


async def test_a_failed_or_cancelled_job_leaves_its_companions_succeeded(
    batched: Batching,
) -> None:
    blocker = await batched.block_lane()
    slow = {"sim_seconds": 1.0, "sim_steps": 100}
    good = [await batched.submit(params=slow) for _ in range(2)]
    failing = await batched.submit(params={**slow, "sim_fail": "error"})
    cancelled = await batched.submit(params=slow)
    await batched.release(blocker)
    async with asyncio.timeout(10):
        while (await batched.client.get(f"/v1/jobs/{cancelled}")).json()["state"] != "running":
            await asyncio.sleep(0.01)
    assert (await batched.client.post(f"/v1/jobs/{cancelled}/cancel")).status_code == 202
    ended = await batched.ended(*good, failing, cancelled)
    assert batched.passes() == [{*good, failing, cancelled}]
    assert [ended[job]["state"] for job in good] == ["succeeded", "succeeded"]
    assert ended[failing]["state"] == "failed"
    assert ended[failing]["error"]["code"] == "runtime_error"
    assert ended[cancelled]["state"] == "cancelled"
    for job in good:
        assert (await batched.client.get(f"/v1/jobs/{job}/result")).status_code == 200


async def test_each_job_of_a_batch_keeps_its_own_log_lines(batched: Batching) -> None:
    blocker = await batched.block_lane()
    good = await batched.submit()
    failing = await batched.submit(params={"sim_fail": "error"})
    await batched.release(blocker)
    await batched.ended(good, failing)
    assert batched.passes() == [{good, failing}]
    logs = {job: (await batched.client.get(f"/v1/jobs/{job}/logs")).text for job in (good, failing)}
    for job, log in logs.items():
        other = failing if job == good else good
        assert f"job {job} queued" in log, log
        assert f"job {job} started on sim:0" in log, log
        assert other not in log, log  # the batch's first job's log holds only its own lines
    assert logs[good].rstrip().endswith("succeeded")
    assert "failed: runtime_error" in logs[failing]


async def test_a_batch_never_lets_lower_priority_jobs_overtake_one_that_cannot_join(
    batched: Batching,
) -> None:
    blocker = await batched.block_lane()
    head = await batched.submit(priority=5)
    other = await batched.submit(priority=5, params={"imgsz": 320})
    low = await batched.submit(priority=1)
    peer = await batched.submit(priority=5)
    await batched.release(blocker)
    ended = await batched.ended(head, other, low, peer)
    assert batched.passes() == [{head, peer}]  # `low` waits behind `other`
    started = {job_id: datetime.fromisoformat(job["started_at"]) for job_id, job in ended.items()}
    assert started[head] == started[peer] < started[other] < started[low]


async def test_an_out_of_memory_batch_is_split_and_retried_before_anyone_fails(
    batched: Batching,
) -> None:
    blocker = await batched.block_lane()
    jobs = [
        await batched.submit(inputs=[f"{i}.jpg"], params={"sim_oom_above": 2}) for i in range(4)
    ]
    await batched.release(blocker)
    ended = await batched.ended(*jobs)
    assert {job["state"] for job in ended.values()} == {"succeeded"}
    assert batched.passes(ran=False) == [set(jobs)]
    assert batched.passes() == [set(jobs[:2]), set(jobs[2:])]


async def test_only_the_job_that_runs_out_of_memory_alone_fails(batched: Batching) -> None:
    blocker = await batched.block_lane()
    jobs = [await batched.submit(inputs=[f"{i}.jpg"]) for i in range(3)]
    culprit = await batched.submit(inputs=["x.jpg"], params={"sim_fail": "oom"})
    await batched.release(blocker)
    ended = await batched.ended(*jobs, culprit)
    assert [ended[job]["state"] for job in jobs] == ["succeeded"] * 3
    assert ended[culprit]["state"] == "failed"
    assert ended[culprit]["error"]["code"] == "cuda_oom"
    assert {*jobs[:2]} in batched.passes()  # the half without the culprit ran


async def test_a_lane_waits_for_companions_within_the_window(
    batching_factory: Callable[..., BatchingServer],
) -> None:
    # full at two images: the window ends when the second job joins, not after 10 s
    async with batching_factory(batch_max_images={"sim": 2}, batch_window_ms=10_000) as b:
        first = await b.submit(inputs=["a.jpg"])
        second = await b.submit(inputs=["b.jpg"])
        ended = await b.ended(first, second)
        assert {job["state"] for job in ended.values()} == {"succeeded"}
        assert b.passes() == [{first, second}]


async def test_without_batching_every_job_runs_alone(
    batching_factory: Callable[..., BatchingServer],
) -> None:
    async with batching_factory() as b:  # the default for the simulated runtime: 1 image
        blocker = await b.block_lane()
        jobs = [await b.submit() for _ in range(3)]
        await b.release(blocker)
        await b.ended(*jobs)
        assert b.runtime.batches == []


def _job(seq: int, priority: int, imgsz: int = 640, images: int = 1) -> Job:
    return Job(
        id=f"j{seq}",
        seq=seq,
        kind=JobKind.INFERENCE,
        state=JobState.QUEUED,
        model="sim",
        spec={"params": {"imgsz": imgsz}, "files": [{"path": "/x"}] * images},
        priority=priority,
        gpus=1,
        attempt=0,
        max_attempts=3,
        created_at=utcnow(),
    )


def test_companions_follow_the_queue_and_stop_below_a_job_that_cannot_join() -> None:
    order = QueueOrder(utcnow())
    head = _job(0, 5)
    queue = [_job(1, 5, imgsz=320), _job(2, 5), _job(3, 4), _job(4, 5, images=9), _job(5, 5)]
    assert [job.id for job in companions(head, queue, order, room=7)] == ["j2", "j5"]
    assert [job.id for job in companions(head, queue, order, room=1)] == ["j2"]
    assert companions(head, queue, order, room=0) == []


def test_lane_kinds_have_their_own_batch_size() -> None:
    policy = BatchPolicy({"cuda": 32, "cpu": 8})
    assert (policy.capacity("cuda:1"), policy.capacity("cpu"), policy.capacity("sim:0")) == (
        32,
        8,
        1,
    )
    assert BatchRecord(("a", "b"), 2).ran
