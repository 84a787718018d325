"""Video jobs through the HTTP API on the CPU: by path and by upload, paging through frames,
tracking settings checked at submission, unreadable videos refused before anything is stored."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import serve, wait_terminal
from tests.support.problems import assert_problem
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.testing.video import make_video
from yolo_orch.testing.yolo import build_checkpoint, ensure_ultralytics

IMGSZ = 64
FRAMES = 30


@pytest.fixture
async def client(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    settings_factory: Callable[..., Settings],
) -> AsyncIterator[httpx.AsyncClient]:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    data, model_root = tmp_path / "data", tmp_path / "weights"
    make_video(data / "clips" / "clip.mp4", frames=FRAMES)
    make_video(data / "clips" / "wide.mp4", frames=2, size=(640, 480))  # past max_image_pixels
    (data / "clips" / "fake.mkv").write_bytes(b"no video in here" * 64)
    build_checkpoint(model_root / "tiny.pt")
    settings = settings_factory(
        runtime="auto",
        database_url="",
        data_roots=[data],
        model_roots=[model_root],
        max_upload_bytes=64 << 20,
        max_image_pixels=100_000,
    )
    async with serve(create_app(settings)) as client:
        response = await client.post("/v1/models", json={"path": "tiny.pt"})
        assert response.status_code == 201, response.text
        yield client


async def submit(client: httpx.AsyncClient, inputs: list[str], **params: Any) -> httpx.Response:
    job = {"kind": "inference", "model": "tiny", "inputs": inputs, "params": params}
    return await client.post("/v1/jobs", json={**job, "params": {"imgsz": IMGSZ, **params}})


async def test_a_tracked_video_job_pages_through_its_frames(client: httpx.AsyncClient) -> None:
    response = await submit(
        client, ["clips/clip.mp4"], track="bytetrack", tracker={"track_buffer": 10}, max_det=3
    )
    assert response.status_code == 202, response.text
    job = await wait_terminal(client, response.json()["id"], deadline_s=60)
    assert job["state"] == "succeeded", job
    assert job["progress"] == {
        "done": FRAMES,
        "total": FRAMES,
        "unit": "frames",
        "detail": {"frame_count": "declared"},
    }
    assert job["result"]["frames"] == FRAMES
    assert sum(job["result"]["tracks_per_class"].values()) >= 1

    url = f"/v1/jobs/{job['id']}/result"
    video = (await client.get(url)).json()["images"][0]
    assert video["video"]["frames"] == FRAMES
    page = await client.get(url, params={"entry": 0, "offset": 5, "limit": 3})
    assert page.status_code == 200, page.text
    body = page.json()
    assert (body["total"], body["offset"], body["next_offset"]) == (FRAMES, 5, 8)
    assert [frame["frame"] for frame in body["frames"]] == [5, 6, 7]
    assert all("track_id" in d for frame in body["frames"] for d in frame["detections"])
    last = (await client.get(url, params={"entry": 0, "offset": FRAMES - 1})).json()
    assert (len(last["frames"]), last["next_offset"]) == (1, None)
    assert_problem(await client.get(url, params={"entry": 1}), 404, "frames_not_found")

    artifacts = (await client.get(f"/v1/jobs/{job['id']}/artifacts")).json()
    names = [artifact["name"] for artifact in artifacts["artifacts"]]
    assert names == [video["frames"]]  # the index beside it is not an artifact
    jsonl = await client.get(f"/v1/jobs/{job['id']}/artifacts/{video['frames']}")
    lines = jsonl.text.splitlines()
    assert [json.loads(line) for line in lines[5:8]] == body["frames"]


async def test_an_uploaded_video_runs(client: httpx.AsyncClient, tmp_path: Path) -> None:
    clip = tmp_path / "upload.mov"
    make_video(clip, frames=12)
    response = await client.post(
        "/v1/jobs/inference",
        data={"model": "tiny", "params": json.dumps({"imgsz": IMGSZ, "vid_stride": 3})},
        files=[("images", ("holiday.mov", clip.read_bytes(), "video/quicktime"))],
    )
    assert response.status_code == 202, response.text
    job = await wait_terminal(client, response.json()["id"], deadline_s=60)
    assert job["state"] == "succeeded", job
    assert job["result"]["frames"] == 4


async def test_unreadable_videos_and_bad_tracker_settings_are_refused(
    client: httpx.AsyncClient,
) -> None:
    by_path = await submit(client, ["clips/fake.mkv"])
    body = assert_problem(by_path, 422, "invalid_input")
    assert "'clips/fake.mkv': cannot read the file as a video" in body["detail"]
    too_large = assert_problem(await submit(client, ["clips/wide.mp4"]), 422, "invalid_input")
    assert "640x480 frames have more than 100000 pixels" in too_large["detail"]
    uploaded = await client.post(
        "/v1/jobs/inference",
        data={"model": "tiny"},
        files=[("images", ("broken.mp4", b"\x00" * 512, "video/mp4"))],
    )
    assert_problem(uploaded, 422, "invalid_input")
    for params in (
        {"track": "bytetrack", "tracker": {"no_such_key": 1}},
        {"track": "bytetrack", "tracker": {"gmc_method": "orb"}},
        {"track": "botsort", "tracker": {"with_reid": True}},
        {"tracker": {"track_buffer": 5}},
        {"track": "sort"},
        {"start_s": 2, "end_s": 1},
        {"vid_stride": 0},
    ):
        assert_problem(await submit(client, ["clips/clip.mp4"], **params), 422, "invalid_request")
    assert (await client.get("/v1/jobs")).json()["jobs"] == []
