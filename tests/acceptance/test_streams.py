"""Live streams against real components: GStreamer's RTSP server on loopback and a real
`yolo-orch serve` (the simulated runtime's detector, real decoding): the camera killed and
restarted, the server SIGKILLed, streams sharing forward passes, cancel freeing the lane's share,
and credentials that never show."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.servers import ServerFactory
from tests.support.stream_sources import require_rtsp
from yolo_orch.testing import wait_for
from yolo_orch.testing.server import Server
from yolo_orch.testing.streams import RtspServer

pytestmark = pytest.mark.acceptance

PASSWORD = "s3cret-Pa55"
TIMEOUT_S = 60.0


@pytest.fixture
def cameras() -> Iterator[RtspServer]:
    require_rtsp()
    with RtspServer(mounts=2, width=320, height=240, fps=15) as server:
        yield server


def start_server(server_factory: ServerFactory, **settings: object) -> Server:
    server = server_factory(sim_lanes=1, stream_allowed_hosts='["127.0.0.1"]', **settings)
    server.start()
    return server


def submit_stream(client: httpx.Client, sources: list[str], **params: Any) -> str:
    body = {"kind": "stream", "model": "sim", "sources": sources, "params": params}
    response = client.post("/v1/jobs", json=body)
    assert response.status_code == 202, response.text
    job_id: str = response.json()["id"]
    return job_id


def detail(client: httpx.Client, job_id: str) -> dict[str, Any]:
    job = client.get(f"/v1/jobs/{job_id}").json()
    progress = job.get("progress") or {}
    return {"state": job["state"], "attempt": job["attempt"], **(progress.get("detail") or {})}


def live_with_frames(client: httpx.Client, job_id: str, more_than: int = 0) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        now = detail(client, job_id)
        frames = sum(s["frames_processed"] for s in now.get("sources", []))
        return now if now.get("health") == "live" and frames > more_than else None

    return wait_for(check, TIMEOUT_S, f"stream {job_id} live with more than {more_than} frames")


def test_a_camera_that_goes_away_is_reconnected(
    server_factory: ServerFactory, cameras: RtspServer
) -> None:
    server = start_server(server_factory)
    with server.client() as client:
        job_id = submit_stream(client, [cameras.url(0)], max_fps=5, reconnect_give_up_s=120)
        before = live_with_frames(client, job_id)
        cameras.kill()
        wait_for(
            lambda: detail(client, job_id).get("health") == "reconnecting",
            TIMEOUT_S,
            "reconnecting once the camera is gone",
        )
        cameras.restart()
        after = live_with_frames(client, job_id, before["sources"][0]["frames_processed"])
        assert after["sources"][0]["reconnects"] >= 1
        assert after["state"] == "running"


def test_a_stream_resumes_by_itself_after_the_server_is_killed(
    server_factory: ServerFactory, cameras: RtspServer
) -> None:
    server = start_server(server_factory, max_attempts=1)
    with server.client() as client:
        job_id = submit_stream(client, [cameras.url(0)], max_fps=5)
        live_with_frames(client, job_id, 3)
        seq = client.get(f"/v1/jobs/{job_id}/result", params={"since": 0}).json()["next_since"]
    assert server.kill() == -9
    server.start()
    with server.client() as client:
        resumed = live_with_frames(client, job_id)
        # one attempt allowed, and still running: the restart was not counted as one
        assert resumed["state"] == "running"
        assert resumed["attempt"] == 1
        page = client.get(f"/v1/jobs/{job_id}/result", params={"since": seq}).json()
        assert page["frames"]
        assert page["frames"][0]["seq"] == seq + 1


def test_streams_of_one_model_share_forward_passes_and_cancel_frees_the_share(
    server_factory: ServerFactory, cameras: RtspServer
) -> None:
    server = start_server(server_factory, batch_max_images='{"sim": 8}')
    with server.client() as client:
        # passes of 0.1 s, frames every 0.1 s from each: frames of both wait for each pass
        jobs = [
            submit_stream(client, [cameras.url(i)], max_fps=10, sim_seconds=0.1) for i in (0, 1)
        ]
        for job_id in jobs:
            wait_for(
                lambda job_id=job_id: detail(client, job_id).get("shared_frames", 0) > 5,
                TIMEOUT_S,
                f"stream {job_id} in passes with the other",
            )
        (lane,) = client.get("/v1/devices").json()["devices"]
        assert sorted(s["job_id"] for s in lane["streams"]) == sorted(jobs)
        for job_id in jobs:
            assert client.post(f"/v1/jobs/{job_id}/cancel").status_code == 202
        for job_id in jobs:
            wait_for(lambda j=job_id: detail(client, j)["state"] == "cancelled", TIMEOUT_S, "end")
        (lane,) = client.get("/v1/devices").json()["devices"]
        assert lane["streams"] == []


def test_credentials_in_a_source_never_show(
    server_factory: ServerFactory, cameras: RtspServer, tmp_path: Path
) -> None:
    server = start_server(server_factory)
    url = cameras.url_with_credentials("admin", PASSWORD, 0)
    with server.client() as client:
        job_id = submit_stream(client, [url], max_fps=5, snapshot_every_s=1)
        live_with_frames(client, job_id, 3)
        cameras.kill()  # a reconnect logs about the source too
        wait_for(lambda: detail(client, job_id).get("health") == "reconnecting", TIMEOUT_S, "lost")
        cameras.restart()
        live_with_frames(client, job_id, 6)
        job = client.get(f"/v1/jobs/{job_id}").json()
        assert job["sources"] == [f"rtsp://***@127.0.0.1:{cameras.port}/cam0"]
        bodies = [
            client.post("/v1/jobs", json={"kind": "stream", "model": "sim", "sources": [url]}).text,
            client.get(f"/v1/jobs/{job_id}").text,
            client.get("/v1/jobs").text,
            client.get(f"/v1/jobs/{job_id}/logs").text,
            client.get(f"/v1/jobs/{job_id}/result", params={"since": 0}).text,
            client.get("/v1/devices").text,
            client.get("/metrics").text,
        ]
        for job in client.get("/v1/jobs").json()["jobs"]:
            client.post(f"/v1/jobs/{job['id']}/cancel")
    server.stop()
    logs = [server.stderr(), *(p.read_text() for p in server.data_dir.rglob("*.log"))]
    for text in [*bodies, *logs]:
        assert PASSWORD not in text
