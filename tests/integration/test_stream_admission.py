"""How streams are admitted beside batch work (the simulated runtime, looped local videos): a
stream holds a share of a lane, not a turn, so batch jobs keep running beside it; a stream that
fits no lane waits without holding back the jobs behind it; the lane's frame budget counts; a
drain leaves streams at once, and the next start resumes them without counting an attempt."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import serve
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.runners.simulated import SimulatedRuntime
from yolo_orch.runners.stream import StreamOutputs
from yolo_orch.testing.video import make_video

TIMEOUT_S = 30.0


@pytest.fixture
def data(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    make_video(folder / "clip.mp4", frames=30, size=(160, 120))
    return folder


def stream(max_fps: float = 5.0, **params: Any) -> dict[str, Any]:
    return {
        "kind": "stream",
        "model": "sim",
        "sources": ["clip.mp4"],
        "params": {"max_fps": max_fps, **params},
    }


async def submitted(client: httpx.AsyncClient, body: dict[str, Any]) -> str:
    response = await client.post("/v1/jobs", json=body)
    assert response.status_code == 202, response.text
    job_id: str = response.json()["id"]
    return job_id


async def job(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    found: dict[str, Any] = (await client.get(f"/v1/jobs/{job_id}")).json()
    return found


async def until(
    client: httpx.AsyncClient, job_id: str, check: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    for _ in range(int(TIMEOUT_S / 0.1)):
        found = await job(client, job_id)
        if check(found):
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"job {job_id} never got there: {found}")


def frames(found: dict[str, Any]) -> int:
    progress = found.get("progress") or {}
    return int(progress.get("done", 0))


async def test_a_stream_never_starves_the_queue(
    data: Path, settings_factory: Callable[..., Settings]
) -> None:
    settings = settings_factory(
        runtime="simulated", sim_lanes=1, data_roots=[data], streams_per_lane={"sim": 1}
    )
    async with serve(create_app(settings)) as client:
        first = await submitted(client, stream())
        await until(client, first, lambda j: j["state"] == "running" and frames(j) > 0)
        waiting = await submitted(client, stream())
        # behind a stream that fits no lane, batch work starts and ends on the lane's turn
        batch = await submitted(client, {"kind": "inference", "model": "sim", "inputs": ["a"]})
        done = await until(client, batch, lambda j: j["state"] == "succeeded")
        assert done["devices"] == ["sim:0"]
        assert (await job(client, waiting))["state"] == "queued"
        assert (await job(client, first))["state"] == "running"
        assert (await client.post(f"/v1/jobs/{first}/cancel")).status_code == 202
        await until(client, first, lambda j: j["state"] == "cancelled")
        # the share it freed goes to the stream that waited
        await until(client, waiting, lambda j: j["state"] == "running" and frames(j) > 0)
        await client.post(f"/v1/jobs/{waiting}/cancel")
        await until(client, waiting, lambda j: j["state"] == "cancelled")


async def test_the_lanes_frame_budget_counts(
    data: Path, settings_factory: Callable[..., Settings]
) -> None:
    settings = settings_factory(
        runtime="simulated",
        sim_lanes=1,
        data_roots=[data],
        streams_per_lane={"sim": 4},
        stream_fps_per_lane={"sim": 10.0},
    )
    async with serve(create_app(settings)) as client:
        too_many = await client.post("/v1/jobs", json=stream(max_fps=11))
        assert too_many.status_code == 422
        assert too_many.json()["code"] == "stream_unsupported"
        first = await submitted(client, stream(max_fps=6))
        await until(client, first, lambda j: j["state"] == "running")
        second = await submitted(client, stream(max_fps=6))  # 12 > 10: it waits
        third = await submitted(client, stream(max_fps=4))  # 10: it fits
        await until(client, third, lambda j: j["state"] == "running")
        assert (await job(client, second))["state"] == "queued"
        for job_id in (first, second, third):
            await client.post(f"/v1/jobs/{job_id}/cancel")
        for job_id in (first, second, third):
            await until(client, job_id, lambda j: j["state"] == "cancelled")


async def test_two_streams_of_one_model_share_passes(
    data: Path, settings_factory: Callable[..., Settings]
) -> None:
    settings = settings_factory(runtime="simulated", sim_lanes=1, data_roots=[data])
    runtime = SimulatedRuntime(1, StreamOutputs(max_batch=lambda lane: 8))
    async with serve(create_app(settings, runtime=runtime)) as client:
        # passes of 0.1 s, frames every 0.05 s: frames of both wait for each pass
        jobs = [await submitted(client, stream(max_fps=20, sim_seconds=0.1)) for _ in range(2)]
        for job_id in jobs:
            await until(client, job_id, lambda j: frames(j) > 10)
        shared = [
            record for record in runtime.streams.hubs.batches if set(jobs) <= set(record.job_ids)
        ]
        assert shared, runtime.streams.hubs.batches
        assert all(record.images >= 2 for record in shared)
        for job_id in jobs:
            await client.post(f"/v1/jobs/{job_id}/cancel")
        for job_id in jobs:
            await until(client, job_id, lambda j: j["state"] == "cancelled")


async def test_a_stream_ends_with_end_s_or_max_frames(
    data: Path, settings_factory: Callable[..., Settings]
) -> None:
    settings = settings_factory(runtime="simulated", data_roots=[data])
    async with serve(create_app(settings)) as client:
        by_frames = await submitted(client, stream(max_fps=20, max_frames=15))
        by_time = await submitted(client, stream(end_s=1.5))
        counted = await until(client, by_frames, lambda j: j["state"] == "succeeded")
        assert counted["result"]["frames"] >= 15
        timed = await until(client, by_time, lambda j: j["state"] == "succeeded")
        assert timed["result"]["frames"] > 0
        result = (await client.get(f"/v1/jobs/{by_frames}/result")).json()
        assert result["frames"] == counted["result"]["frames"]
        assert result["sources"][0]["source"] == "clip.mp4"
        assert result["segments"]


async def test_a_drain_leaves_streams_at_once_and_the_next_start_resumes_them(
    data: Path, settings_factory: Callable[..., Settings]
) -> None:
    settings = settings_factory(
        runtime="simulated",
        database_url="",  # on disk, for the next start
        data_roots=[data],
        shutdown_grace_s=30.0,
        max_attempts=1,
    )
    async with serve(create_app(settings)) as client:
        job_id = await submitted(client, stream())
        await until(client, job_id, lambda j: frames(j) > 0)
        loop = asyncio.get_running_loop()
        stopping = loop.time()
    # the server stopped without waiting out its 30 s grace for a job that never ends
    assert loop.time() - stopping < 10
    async with serve(create_app(settings)) as client:
        resumed = await until(client, job_id, lambda j: j["state"] == "running" and frames(j) > 0)
        assert resumed["attempt"] == 1
        await client.post(f"/v1/jobs/{job_id}/cancel")
        await until(client, job_id, lambda j: j["state"] == "cancelled")


async def test_zones_and_lines_count_on_a_server_with_its_database_on_disk(
    data: Path, settings_factory: Callable[..., Settings]
) -> None:
    # params read back from the store's JSON: points are lists there
    settings = settings_factory(runtime="simulated", database_url="", data_roots=[data])
    line = {"name": "mid", "start": [0.5, 0.0], "end": [0.5, 1.0]}
    zone = {"name": "left", "points": [[0, 0], [0.5, 0], [0.5, 1], [0, 1]]}
    async with serve(create_app(settings)) as client:
        job_id = await submitted(
            client, stream(max_fps=10, track="bytetrack", lines=[line], zones=[zone])
        )
        found = await until(client, job_id, lambda j: frames(j) > 0)
        assert found["state"] == "running", found
        (counts,) = found["progress"]["detail"]["counts"]
        assert set(counts["lines"]) == {"mid"}
        assert set(counts["zones"]) == {"left"}
        await client.post(f"/v1/jobs/{job_id}/cancel")
        await until(client, job_id, lambda j: j["state"] == "cancelled")
