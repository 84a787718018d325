"""A client that sends `Prefer: wait` and goes away while the answer is held: the job it
submitted was committed before the wait, and runs to its end."""

from __future__ import annotations

import socket
import time

import pytest

from tests.support.servers import ServerFactory, list_all_jobs
from yolo_orch.testing import wait_terminal


@pytest.mark.acceptance
def test_a_client_that_leaves_mid_wait_leaves_the_job_running(
    server_factory: ServerFactory,
) -> None:
    server = server_factory()
    server.start()
    body = (
        b'{"kind": "inference", "model": "sim", "inputs": ["a.jpg"], "params": {"sim_seconds": 1}}'
    )
    request = (
        b"POST /v1/jobs HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Prefer: wait=30\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(request)
        time.sleep(0.3)  # the job is committed and the answer held
    # The connection is gone; the job is not.
    with server.client() as client:
        (job,) = list_all_jobs(client)
        assert wait_terminal(client, job["id"], 30)["state"] == "succeeded"
        assert client.get("/healthz").status_code == 200
