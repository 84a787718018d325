"""Connections as a bounded resource, on a real `serve` and real sockets: a flood past the
process's open-files limit, held waits giving their places to new clients, a stalled body, and
the probes answered when no place can be freed."""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.raw_http import HEALTHZ, Connection, Reply, post_head
from tests.support.servers import ServerFactory, submit
from yolo_orch.testing import Server, sim_inference, wait_for, wait_terminal

pytestmark = pytest.mark.acceptance

FD_SOFT, FD_HARD = 256, 512
"""The server starts with these open-files limits (prlimit) and raises the soft one."""
FLOOD = 4 * FD_HARD


@contextlib.contextmanager
def _held_waits(server: Server, count: int, gap_s: float) -> Iterator[list[Connection]]:
    """`count` connections, each holding a `Prefer: wait` on one long job, opened `gap_s` apart
    (in order: the first is the oldest)."""
    with server.client() as client:
        job = submit(client, sim_inference("long", sim_seconds=30, sim_steps=30))
    request = f"GET /v1/jobs/{job['id']} HTTP/1.1\r\nHost: localhost\r\nPrefer: wait=30\r\n\r\n"
    waits = [Connection(server) for _ in range(count)]
    try:
        for wait in waits:
            wait.send(request.encode())
            time.sleep(gap_s)
        yield waits
    finally:
        for wait in waits:
            wait.close()


def _job_as_it_is(reply: Reply) -> None:
    assert reply.status == 200
    assert json.loads(reply.body)["state"] in {"queued", "running"}


def _still_held(waits: list[Connection]) -> None:
    for held in waits:
        held._sock.settimeout(0.3)
        with pytest.raises(TimeoutError):
            held.reply()


@contextlib.contextmanager
def _sockets(port: int, count: int) -> Iterator[list[socket.socket]]:
    opened: list[socket.socket] = []
    try:
        for _ in range(count):
            with contextlib.suppress(OSError):  # the backlog may be full for a moment
                opened.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        yield opened
    finally:
        for sock in opened:
            sock.close()


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed it (after a 503, or at once)."""
    sock.settimeout(0.05)
    try:
        while sock.recv(1 << 16):
            pass
    except TimeoutError:
        return False
    except OSError:
        return True  # reset
    return True


def test_a_flood_past_the_open_files_limit_leaves_the_server_serving(
    server_factory: ServerFactory,
) -> None:
    server = server_factory(wrap=["prlimit", f"--nofile={FD_SOFT}:{FD_HARD}", "--"])
    server.start()
    assert f"(open files: limit {FD_HARD}, hard limit {FD_HARD})" in server.stderr()
    with server.client() as client, _sockets(server.port, FLOOD) as flood:
        job = submit(client, sim_inference("during-flood", sim_seconds=1, sim_steps=10))
        time.sleep(1.2)  # the flood's silent connections may now give their places up
        for _ in range(10):
            assert client.get("/healthz", headers={"Connection": "close"}).status_code == 200
        assert wait_terminal(client, job["id"], 30)["state"] == "succeeded"
        closed = sum(_closed_by_server(sock) for sock in flood)
    assert closed >= FLOOD - FD_HARD  # the server kept under its limit by closing the rest
    log = server.stderr()
    assert "Too many open files" not in log
    assert "could not fsync" not in log


def test_held_waits_give_their_places_to_new_clients(server_factory: ServerFactory) -> None:
    server = server_factory(max_connections=4)
    server.start()
    with _held_waits(server, 4, gap_s=0.05) as waits:
        time.sleep(0.3)
        with server.client() as client:  # a fifth client takes the first wait's place
            assert client.get("/healthz").status_code == 200
        reply = waits[0].reply()
        _job_as_it_is(reply)
        assert reply.headers["connection"] == "close"
        assert waits[0].closed_by_server()
        with server.client() as client:
            metrics = client.get("/metrics").text
        assert "yolo_orch_connections_limit 4.0" in metrics
        shed = re.search(r"^yolo_orch_connections_shed_total (\S+)$", metrics, re.MULTILINE)
        assert shed is not None
        assert float(shed[1]) >= 1
        _still_held(waits[2:])  # the metrics client took one place more, at most


def _files(root: Path) -> set[Path]:
    return {
        path
        for path in root.rglob("*")
        if path.is_file() and not path.name.startswith("yolo-orch.") and path.suffix != ".log"
    }


@pytest.mark.parametrize(
    "head",
    [
        post_head(5000),
        (
            b"POST /v1/models HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100000\r\n"
            b"Content-Type: multipart/form-data; boundary=b\r\n\r\n--b\r\nContent-Disposition: "
            b'form-data; name="file"; filename="w.pt"\r\n\r\n'
        ),
    ],
    ids=["json", "upload"],
)
def test_a_stalled_body_gets_408_and_nothing_it_sent_is_kept(
    server_factory: ServerFactory, head: bytes
) -> None:
    server = server_factory(body_idle_timeout_s=1)
    server.start()
    before = _files(server.data_dir)
    conn = Connection(server)
    try:
        conn.send(head + b"abc")
        started = time.monotonic()
        reply = conn.reply()
        waited = time.monotonic() - started
        reply.problem(408, "request_timeout")
        assert reply.headers["connection"] == "close"
        assert 0.9 < waited < 10
        assert conn.closed_by_server()
    finally:
        conn.close()
    assert _files(server.data_dir) == before


def test_past_the_cap_with_nothing_to_shed_only_the_probes_answer(
    server_factory: ServerFactory,
) -> None:
    server = server_factory(max_connections=1)
    server.start()
    busy = Connection(server)  # a body that keeps arriving: never shed
    stop = threading.Event()

    def trickle() -> None:
        busy.send(post_head(1 << 20))
        while not stop.wait(0.1):
            with contextlib.suppress(OSError):
                busy.send(b" ")

    feeder = threading.Thread(target=trickle)
    feeder.start()
    try:
        time.sleep(0.3)
        refused = Connection(server)
        refused.send(b"GET /v1/jobs HTTP/1.1\r\nHost: localhost\r\n\r\n")
        reply = refused.reply()
        reply.problem(503, "too_many_connections")
        assert reply.headers["retry-after"] == "1"
        refused.close()
        probe = Connection(server)
        probe.send(HEALTHZ)
        assert probe.reply().status == 200
        assert probe.closed_by_server()  # its place was lent for the probe alone
        probe.close()
    finally:
        stop.set()
        feeder.join()
        busy.close()
    with server.client() as client:  # the place is free again
        wait_for(lambda: client.get("/v1/jobs").status_code == 200, 5, "a place")


def test_past_max_held_requests_the_oldest_wait_is_answered(server_factory: ServerFactory) -> None:
    server = server_factory(max_held_requests=2)
    server.start()
    with _held_waits(server, 3, gap_s=0.2) as waits:  # each begins to wait before the next
        _job_as_it_is(waits[0].reply())
        _still_held(waits[1:])
