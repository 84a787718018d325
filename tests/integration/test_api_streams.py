"""Stream jobs through the HTTP API on the simulated runtime (real sources read with OpenCV, a
fake detector: one person crossing the frame left to right every 4 s): their frames paged with
`since`, `frame` events, the snapshot, their lane shares on /v1/devices, their gauges on
/metrics, credentials kept out of every answer, and the sources refused at submission."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from tests.conftest import serve, sim_job, wait_terminal
from tests.support.problems import assert_problem, wait_state
from tests.support.sse import parse_sse
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.testing.streams import MjpegServer, RtspServer
from yolo_orch.testing.video import make_video

PASSWORD = "s3cr3t-Pa55"
"""Put in a source URL: no answer may ever show it."""
MID_LINE = {"name": "mid", "start": [0.5, 0], "end": [0.5, 1]}

T = TypeVar("T")


@pytest.fixture
async def client(
    tmp_path: Path, settings_factory: Callable[..., Settings]
) -> AsyncIterator[httpx.AsyncClient]:
    data = tmp_path / "data"
    make_video(data / "clip.mp4", frames=30, size=(320, 240))
    make_video(data / "more" / "a.mp4", frames=5, size=(320, 240))
    make_video(data / "more" / "b.mp4", frames=5, size=(320, 240))
    (data / "photo.jpg").write_bytes(_tiny_jpeg())
    settings = settings_factory(data_roots=[data], stream_allowed_hosts=["127.0.0.1"])
    async with serve(create_app(settings)) as client:
        yield client


def _tiny_jpeg() -> bytes:
    import cv2
    import numpy as np

    ok, jpeg = cv2.imencode(".jpg", np.zeros((16, 16, 3), dtype=np.uint8))
    assert ok
    return bytes(jpeg.tobytes())


async def start_stream(
    client: httpx.AsyncClient, sources: list[str], **params: Any
) -> dict[str, Any]:
    params = {"max_fps": 20, "snapshot_every_s": 0.2, **params}
    job = {"kind": "stream", "model": "sim", "sources": sources, "params": params}
    response = await client.post("/v1/jobs", json=job)
    assert response.status_code == 202, response.text
    body: dict[str, Any] = response.json()
    return body


async def eventually(
    ask: Callable[[], Awaitable[T]], done: Callable[[T], bool], deadline_s: float = 20.0
) -> T:
    """Ask again until the answer is `done` (a stream's frames come at their own pace)."""
    async with asyncio.timeout(deadline_s):
        while not done(answer := await ask()):
            await asyncio.sleep(0.05)
    return answer


async def cancelled(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    assert (await client.post(f"/v1/jobs/{job_id}/cancel")).status_code in (200, 202)
    job = await wait_terminal(client, job_id, deadline_s=20)
    assert job["state"] == "cancelled", job
    return job


async def test_frames_are_paged_with_since_while_running_and_after(
    client: httpx.AsyncClient,
) -> None:
    job = await start_stream(client, ["clip.mp4"])
    url = f"/v1/jobs/{job['id']}/result"

    async def since_zero() -> dict[str, Any]:
        response = await client.get(url, params={"since": 0})
        assert response.status_code == 200, response.text
        page: dict[str, Any] = response.json()
        return page

    first = await eventually(since_zero, lambda page: len(page["frames"]) >= 6)
    seqs = [frame["seq"] for frame in first["frames"]]
    assert seqs == list(range(1, len(seqs) + 1))
    assert (first["next_since"], first["oldest"]) == (seqs[-1], 1)
    frame = first["frames"][0]
    assert {"source", "frame", "captured_at", "latency_ms", "width", "height"} <= set(frame)
    assert (frame["source"], frame["width"], frame["height"]) == (0, 320, 240)
    assert frame["detections"][0]["class_name"] == "person"

    two = (await client.get(url, params={"since": 2, "limit": 2})).json()
    assert [frame["seq"] for frame in two["frames"]] == [3, 4]
    assert two["next_since"] == 4
    after = (await client.get(url, params={"since": two["next_since"], "limit": 1})).json()
    assert [frame["seq"] for frame in after["frames"]] == [5]
    assert_problem(await client.get(url), 409, "result_not_ready")
    assert_problem(await client.get(url, params={"since": 0, "offset": 1}), 422, "invalid_request")
    assert (await client.get(url, params={"since": 0, "limit": 1001})).status_code == 422

    await cancelled(client, job["id"])
    ended = (await client.get(url, params={"since": 0, "limit": 1000})).json()
    assert len(ended["frames"]) >= len(seqs)
    beyond = (await client.get(url, params={"since": ended["next_since"]})).json()
    assert (beyond["frames"], beyond["next_since"]) == ([], ended["next_since"])
    assert_problem(await client.get(url), 409, "no_result")


async def test_a_stream_that_reaches_max_frames_keeps_its_result(
    client: httpx.AsyncClient,
) -> None:
    job = await start_stream(client, ["clip.mp4"], max_frames=5)
    ended = await wait_terminal(client, job["id"], deadline_s=20)
    assert ended["state"] == "succeeded", ended
    result = (await client.get(f"/v1/jobs/{job['id']}/result")).json()
    assert result["frames"] >= 5
    assert result["segments"]
    page = (await client.get(f"/v1/jobs/{job['id']}/result", params={"since": 0})).json()
    assert len(page["frames"]) == result["frames"]


async def test_since_on_an_inference_job_is_refused(client: httpx.AsyncClient) -> None:
    job = (await client.post("/v1/jobs", json=sim_job())).json()
    await wait_terminal(client, job["id"])
    response = await client.get(f"/v1/jobs/{job['id']}/result", params={"since": 0})
    problem = assert_problem(response, 422, "not_a_stream")
    assert "stream" in problem["detail"]
    assert_problem(await client.get("/v1/jobs/nope/result?since=0"), 404, "job_not_found")


async def test_frame_events_come_between_the_jobs_own_until_it_ends(
    client: httpx.AsyncClient,
) -> None:
    job = await start_stream(client, ["clip.mp4"], max_frames=40, events_max_hz=30)
    response = await client.get(f"/v1/jobs/{job['id']}/events")
    assert response.status_code == 200

    events = parse_sse(response.text)
    frames = [event for event in events if event["event"] == "frame"]
    assert frames, events
    assert all("id" not in event for event in frames)
    entry = frames[0]["data"]
    assert {"seq", "source", "frame", "captured_at", "latency_ms", "width", "height"} <= set(entry)
    assert {"detections", "events"} <= set(entry)
    seqs = [event["data"]["seq"] for event in frames]
    assert seqs == sorted(set(seqs))
    assert events[-1]["event"] == "state"
    assert events[-1]["data"]["state"] == "succeeded"


async def test_the_snapshot_is_a_jpeg_once_written(client: httpx.AsyncClient) -> None:
    inference = (await client.post("/v1/jobs", json=sim_job())).json()
    await wait_terminal(client, inference["id"])
    assert_problem(
        await client.get(f"/v1/jobs/{inference['id']}/snapshot.jpg"), 404, "snapshot_not_found"
    )
    assert_problem(await client.get("/v1/jobs/nope/snapshot.jpg"), 404, "job_not_found")

    never = await start_stream(client, ["clip.mp4"], snapshot_every_s=0)
    await eventually(
        lambda: client.get(f"/v1/jobs/{never['id']}/result", params={"since": 0}),
        lambda response: bool(response.json()["frames"]),
    )
    assert_problem(
        await client.get(f"/v1/jobs/{never['id']}/snapshot.jpg"), 404, "snapshot_not_found"
    )
    await cancelled(client, never["id"])

    job = await start_stream(client, ["clip.mp4"])
    snapshot = await eventually(
        lambda: client.get(f"/v1/jobs/{job['id']}/snapshot.jpg"),
        lambda response: response.status_code == 200,
    )
    assert snapshot.headers["content-type"] == "image/jpeg"
    assert snapshot.headers["cache-control"] == "no-store"
    assert snapshot.content.startswith(b"\xff\xd8")
    await cancelled(client, job["id"])
    after = await client.get(f"/v1/jobs/{job['id']}/snapshot.jpg")
    assert after.content.startswith(b"\xff\xd8")


async def test_devices_show_a_streams_share_until_it_ends(client: httpx.AsyncClient) -> None:
    job = await start_stream(client, ["clip.mp4"], max_fps=7)
    await wait_state(client, job["id"], "running")

    def shares(devices: httpx.Response) -> list[dict[str, Any]]:
        return [
            {**share, "lane": lane["id"]}
            for lane in devices.json()["devices"]
            for share in lane["streams"]
        ]

    listed = await eventually(
        lambda: client.get("/v1/devices"),
        lambda devices: any(share["fps_out"] for share in shares(devices)),
    )
    (share,) = shares(listed)
    assert (share["job_id"], share["fps_asked"]) == (job["id"], 7.0)
    lane = next(lane for lane in listed.json()["devices"] if lane["id"] == share["lane"])
    assert (lane["stream_slots"], lane["stream_fps"]) == (8, 1000.0)

    await cancelled(client, job["id"])
    await eventually(lambda: client.get("/v1/devices"), lambda devices: not shares(devices))


async def test_metrics_carry_a_streams_gauges_and_its_line_counts(
    client: httpx.AsyncClient,
) -> None:
    job = await start_stream(client, ["clip.mp4"], track="bytetrack", lines=[MID_LINE])
    crossed = (
        f'yolo_orch_stream_count{{class="person",direction="in",job="{job["id"]}",'
        'kind="line",name="mid",source="clip.mp4"}'
    )
    metrics = await eventually(
        lambda: client.get("/metrics"), lambda response: crossed in response.text
    )
    text = metrics.text
    for name in ("fps_in", "fps_out", "frames_dropped"):
        assert f'yolo_orch_stream_{name}{{job="{job["id"]}"}}' in text, name
    for quantile in ("0.5", "0.99"):
        assert f'yolo_orch_stream_latency_ms{{job="{job["id"]}",quantile="{quantile}"}}' in text
    await cancelled(client, job["id"])
    assert f'job="{job["id"]}"' not in (await client.get("/metrics")).text


async def test_an_mjpeg_camera_is_read_as_a_network_source(
    client: httpx.AsyncClient, mjpeg_server: MjpegServer
) -> None:
    job = await start_stream(client, [mjpeg_server.url], max_frames=5, max_fps=10)
    assert job["sources"] == [mjpeg_server.url]
    ended = await wait_terminal(client, job["id"], deadline_s=30)
    assert ended["state"] == "succeeded", ended
    page = (await client.get(f"/v1/jobs/{job['id']}/result", params={"since": 0})).json()
    assert len(page["frames"]) >= 5
    assert (page["frames"][0]["width"], page["frames"][0]["height"]) == (640, 480)


async def test_credentials_in_a_source_are_shown_in_no_answer(
    client: httpx.AsyncClient, rtsp_server: RtspServer
) -> None:
    url = rtsp_server.url_with_credentials("viewer", PASSWORD)
    submitted = await client.post(
        "/v1/jobs",
        json={"kind": "stream", "model": "sim", "sources": [url], "params": {"max_fps": 5}},
    )
    assert submitted.status_code == 202, submitted.text
    job = submitted.json()
    (shown,) = job["sources"]
    assert shown.startswith("rtsp://***@127.0.0.1:")
    await eventually(
        lambda: client.get(f"/v1/jobs/{job['id']}"),
        lambda response: (response.json().get("progress") or {}).get("done", 0) > 0,
        deadline_s=30,
    )
    running = [
        submitted,
        await client.get(f"/v1/jobs/{job['id']}"),
        await client.get("/v1/jobs"),
        await client.get("/v1/devices"),
        await client.get("/metrics"),
        await client.get(f"/v1/jobs/{job['id']}/result", params={"since": 0}),
    ]
    await client.post(f"/v1/jobs/{job['id']}/cancel")
    events = await client.get(f"/v1/jobs/{job['id']}/events")  # ends with the cancel
    assert '"state":"cancelled"' in events.text.replace(" ", "")
    logs = await client.get(f"/v1/jobs/{job['id']}/logs")
    for response in [*running, events, logs]:
        assert response.status_code in (200, 202), response.request.url
        assert PASSWORD not in response.text, response.request.url
        assert "viewer" not in response.text, response.request.url


async def test_a_host_not_allowed_is_refused_without_its_credentials(
    client: httpx.AsyncClient,
) -> None:
    url = f"rtsp://viewer:{PASSWORD}@10.9.8.7:554/cam"
    response = await client.post(
        "/v1/jobs", json={"kind": "stream", "model": "sim", "sources": [url]}
    )
    problem = assert_problem(response, 422, "source_not_allowed")
    assert PASSWORD not in response.text
    assert "10.9.8.7" in problem["detail"]


@pytest.mark.parametrize("source", ["more/*.mp4", "photo.jpg"])
async def test_a_glob_or_an_image_is_no_stream_source(
    client: httpx.AsyncClient, source: str
) -> None:
    response = await client.post(
        "/v1/jobs", json={"kind": "stream", "model": "sim", "sources": [source]}
    )
    assert_problem(response, 422, "invalid_input")
    assert (await client.get("/v1/jobs")).json()["jobs"] == []
