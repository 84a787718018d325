"""Streams on a real ultralytics model on the CPU (an untrained yolo11n that finds class 0
everywhere): tracked detections in the frames, and one-image inference jobs of the same model
and params joining the passes of the lane's streams."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import serve, wait_terminal
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.runners.yolo import UltralyticsRuntime
from yolo_orch.testing.video import make_video
from yolo_orch.testing.yolo import build_checkpoint, ensure_ultralytics, make_images

IMGSZ = 96
PARAMS = {"imgsz": IMGSZ, "max_det": 3, "conf": 0.25}


@pytest.fixture
async def served(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    settings_factory: Callable[..., Settings],
) -> AsyncIterator[tuple[httpx.AsyncClient, UltralyticsRuntime]]:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    data, model_root = tmp_path / "data", tmp_path / "weights"
    make_video(data / "clip.mp4", frames=30, size=(160, 120))
    make_images(data / "images", 8)
    build_checkpoint(model_root / "tiny.pt")
    settings = settings_factory(
        runtime="auto", lanes=["cpu"], data_roots=[data], model_roots=[model_root]
    )
    app = create_app(settings)
    async with serve(app) as client:
        assert (await client.post("/v1/models", json={"path": "tiny.pt"})).status_code == 201
        runtime = app.state.services.runtime
        assert isinstance(runtime, UltralyticsRuntime)
        yield client, runtime


async def running_stream(client: httpx.AsyncClient, **params: Any) -> str:
    body = {"kind": "stream", "model": "tiny", "sources": ["clip.mp4"], "params": params}
    response = await client.post("/v1/jobs", json=body)
    assert response.status_code == 202, response.text
    job_id: str = response.json()["id"]
    for _ in range(300):
        job = (await client.get(f"/v1/jobs/{job_id}")).json()
        if (job.get("progress") or {}).get("done", 0) >= 5:
            return job_id
        assert job["state"] in ("queued", "running"), job
        await asyncio.sleep(0.1)
    raise AssertionError(f"stream {job_id} processed no frames")


async def test_a_tracked_stream_on_a_real_model(
    served: tuple[httpx.AsyncClient, UltralyticsRuntime],
) -> None:
    client, _ = served
    job_id = await running_stream(client, **PARAMS, max_fps=10, track="bytetrack")
    page = (await client.get(f"/v1/jobs/{job_id}/result", params={"since": 0})).json()
    frames = page["frames"]
    assert frames[0]["seq"] == 1
    assert {"source", "frame", "captured_at", "latency_ms", "detections"} <= frames[0].keys()
    tracked = [d for frame in frames for d in frame["detections"]]
    assert tracked
    assert all(isinstance(d["track_id"], int) for d in tracked)
    assert all(d["class_id"] == 0 for d in tracked)  # what the untrained head finds
    await client.post(f"/v1/jobs/{job_id}/cancel")
    assert (await wait_terminal(client, job_id))["state"] == "cancelled"


async def test_one_image_jobs_join_the_passes_of_the_streams(
    served: tuple[httpx.AsyncClient, UltralyticsRuntime],
) -> None:
    client, runtime = served
    streams = [await running_stream(client, **PARAMS, max_fps=30) for _ in range(2)]
    images = []
    for index in [0, 4] * 4:  # the frames' shape (120x160): they may share a pass
        body = {"kind": "inference", "model": "tiny", "inputs": [f"images/img{index}.jpg"]}
        response = await client.post("/v1/jobs", json={**body, "params": PARAMS})
        images.append(response.json()["id"])
        done = await wait_terminal(client, images[-1])
        assert done["state"] == "succeeded", done
        assert done["result"]["images"] == 1
    joined = [
        record
        for record in runtime.streams.hubs.batches
        if set(record.job_ids) & set(images) and set(record.job_ids) & set(streams)
    ]
    assert joined, runtime.streams.hubs.batches
    for job_id in streams:
        await client.post(f"/v1/jobs/{job_id}/cancel")
        assert (await wait_terminal(client, job_id))["state"] == "cancelled"
