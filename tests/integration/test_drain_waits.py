"""When a drain ends, with jobs still running (left for the next start), what the server holds
open for clients ends cleanly, before uvicorn's graceful-shutdown timeout would cancel it: a
held `Prefer: wait` is answered (200 on GET, the usual 202 on a submission) with the job as it
is now, and every event stream is finished after whole events, not cut mid-chunk."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.conftest import serve, sim_job
from tests.support.servers import get_job, submit
from yolo_orch.api.deps import Services
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.testing import Server, sim_inference, wait_for

LONG = {"sim_seconds": 60, "sim_steps": 600}
"""Outlives every test here: the drain leaves it running."""
PROMPTLY_S = 2.0


async def running_job(client: httpx.AsyncClient, **fields: Any) -> str:
    response = await client.post("/v1/jobs", json=sim_job(params=LONG, **fields))
    assert response.status_code == 202, response.text
    job_id: str = response.json()["id"]
    async with asyncio.timeout(5):
        while (await client.get(f"/v1/jobs/{job_id}")).json()["state"] != "running":
            await asyncio.sleep(0.02)
    return job_id


async def held(request: asyncio.Task[Any]) -> None:
    """Until `request` waits for something (it has not ended a while later)."""
    await asyncio.sleep(0.2)
    assert not request.done(), "the request was answered before the drain ended"


async def test_held_waits_answer_with_the_job_as_it_is_when_the_drain_ends(
    settings_factory: Callable[..., Settings],
) -> None:
    app = create_app(settings_factory(sim_lanes=1))
    async with serve(app) as client:
        services: Services = app.state.services
        running = await running_job(client)
        # One lane, taken: a submission behind it stays queued, its answer held.
        submitting = asyncio.create_task(
            client.post("/v1/jobs", json=sim_job(params=LONG), headers={"Prefer": "wait=60"})
        )
        polling = asyncio.create_task(
            client.get(f"/v1/jobs/{running}", headers={"Prefer": "wait=60"})
        )
        await held(submitting)
        await held(polling)

        drained = time.monotonic()
        await services.jobs.drain(0.1)
        async with asyncio.timeout(PROMPTLY_S):
            poll, submission = await polling, await submitting
        answered_after = time.monotonic() - drained

        assert poll.status_code == 200, poll.text
        assert poll.json()["id"] == running
        assert poll.json()["state"] == "running"  # left for the next start
        assert submission.status_code == 202, submission.text
        assert submission.json()["state"] == "queued"
        assert answered_after < 1.0
        # A wait asked for after the drain ended is not held either.
        async with asyncio.timeout(PROMPTLY_S):
            late = await client.get(f"/v1/jobs/{running}", headers={"Prefer": "wait=60"})
        assert late.status_code == 200
        assert late.json()["state"] == "running"


async def follow(app: FastAPI, path: str, messages: list[dict[str, Any]]) -> None:
    """GET `path` straight through the ASGI app, keeping every message it sends (a client that
    stays connected: the app never hears of a disconnect)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"localhost")],
        "client": ("127.0.0.1", 40000),
        "server": ("test", 80),
    }
    request_sent = False
    connected = asyncio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal request_sent
        if not request_sent:
            request_sent = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await connected.wait()  # never set
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    await app(scope, receive, send)


def events_of(messages: list[dict[str, Any]]) -> list[bytes]:
    """The stream's body chunks, once it ended cleanly: a 200 `text/event-stream` whose last
    message finishes the response."""
    start, *body = messages
    assert start["type"] == "http.response.start"
    assert start["status"] == 200
    assert dict(start["headers"])[b"content-type"].startswith(b"text/event-stream")
    assert all(message["type"] == "http.response.body" for message in body)
    assert body, "no body: the stream never ended"
    assert body[-1].get("more_body", False) is False, "the response was never finished"
    assert all(message.get("more_body", False) for message in body[:-1])
    return [message["body"] for message in body if message["body"]]


async def test_event_streams_end_after_whole_events_when_the_drain_ends(
    settings_factory: Callable[..., Settings],
) -> None:
    app = create_app(settings_factory())
    async with serve(app) as client:
        services: Services = app.state.services
        job_id = await running_job(client)
        job_stream: list[dict[str, Any]] = []
        all_stream: list[dict[str, Any]] = []
        streams = [
            asyncio.create_task(follow(app, f"/v1/jobs/{job_id}/events", job_stream)),
            asyncio.create_task(follow(app, "/v1/events", all_stream)),
        ]
        async with asyncio.timeout(5):  # each has sent its first event
            while len(job_stream) < 2 or len(all_stream) < 2:
                await asyncio.sleep(0.02)
        await held(streams[0])
        await held(streams[1])

        await services.jobs.drain(0.1)
        async with asyncio.timeout(PROMPTLY_S):
            await asyncio.gather(*streams)

        job_events = events_of(job_stream)
        assert job_events[0].startswith(b"event: state\n")
        assert b'"state":"running"' in job_events[0]
        all_events = events_of(all_stream)
        assert b"event: ready" in all_events[0]
        for event in (*job_events, *all_events):
            assert event.endswith(b"\n\n"), f"a partial event: {event!r}"


# A real server and a real SIGTERM: the drain of `yolo-orch serve`, and uvicorn's own shutdown.

GRACE_S = 1.0
UVICORN_TIMEOUT_S = 5.0
"""`timeout_graceful_shutdown`: what the drain must end its requests within."""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    server = Server(tmp_path / "data", tmp_path / "logs", shutdown_grace_s=GRACE_S, sim_lanes=1)
    try:
        yield server
    finally:
        server.cleanup()


def stream_until_closed(url: str, opened: threading.Event) -> tuple[int, bytes]:
    """An event stream's status and body, once the server closes it; `opened` is set at its
    first whole event. A stream cut mid-chunk raises (`httpx.RemoteProtocolError`)."""
    body = b""
    with httpx.Client(timeout=30) as client, client.stream("GET", url) as response:
        for chunk in response.iter_raw():
            body += chunk
            if b"\n\n" in body:
                opened.set()
    return response.status_code, body


@pytest.mark.acceptance
def test_sigterm_answers_held_waits_and_closes_event_streams(server: Server) -> None:
    server.start()
    with server.client(timeout=30) as client, ThreadPoolExecutor(4) as pool:
        running = submit(client, sim_inference("long.jpg", **LONG))
        wait_for(lambda: get_job(client, running["id"])["state"] == "running", 10, "the job to run")
        streams: list[tuple[threading.Event, Future[tuple[int, bytes]]]] = []
        for path in (f"/v1/jobs/{running['id']}/events", "/v1/events"):
            opened = threading.Event()
            streams.append((opened, pool.submit(stream_until_closed, server.url + path, opened)))
        wait = {"Prefer": "wait=60"}
        submission = pool.submit(
            client.post, "/v1/jobs", json=sim_inference("queued.jpg", **LONG), headers=wait
        )
        poll = pool.submit(client.get, f"/v1/jobs/{running['id']}", headers=wait)
        for opened, _ in streams:
            assert opened.wait(10), "an event stream sent no first event"
        time.sleep(0.5)  # the waits are held
        assert not poll.done()
        assert not submission.done()

        server.send(signal.SIGTERM)
        signalled = time.monotonic()

        polled = poll.result(timeout=GRACE_S + UVICORN_TIMEOUT_S + 5)
        assert polled.status_code == 200, polled.text
        assert time.monotonic() - signalled < GRACE_S + UVICORN_TIMEOUT_S - 1
        assert polled.json()["state"] == "running"  # left for the next start
        submitted = submission.result(timeout=5)
        assert submitted.status_code == 202, submitted.text
        assert submitted.json()["state"] == "queued"
        for _, stream in streams:
            status, body = stream.result(timeout=5)  # closed cleanly, else this raises
            assert status == 200
            assert body.endswith(b"\n\n"), f"the stream ended within an event: {body[-200:]!r}"
        assert time.monotonic() - signalled < GRACE_S + UVICORN_TIMEOUT_S - 1

    assert server.wait(timeout=UVICORN_TIMEOUT_S + 5) == 0
    log = server.stderr()
    assert "Exception in ASGI application" not in log
    assert "timeout graceful shutdown exceeded" not in log
