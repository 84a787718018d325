"""A job that kills the process it runs in every time ends `failed` (`interrupted`) after
`max_attempts` runs, and the jobs queued behind it still run. With threads that process is the
server, under a supervisor that restarts it each time; on a Ray cluster it is the job's actor
on its node, and the server goes on."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from tests.support.servers import ServerFactory, get_job, submit
from yolo_orch.testing import (
    TERMINAL_STATES,
    Server,
    sim_inference,
    sim_runs,
    sim_training,
    wait_for,
)

MAX_ATTEMPTS = 3
CRASH_EXIT_CODE = 70
"""What the simulated runtime exits with for `sim_fail: "crash"`."""
DEADLINE_S = 40.0


class Supervisor:
    """Restarts the server whenever it has died (as systemd's `Restart=always` would) and
    records how each run of it ended."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.exit_codes: list[int] = []

    def ensure_running(self) -> None:
        code = self.server.returncode
        if code is not None:
            self.exit_codes.append(code)
            self.server.start(wait_ready=False)  # may die again before it answers

    def call(self, request: httpx.Request, client: httpx.Client, deadline: float) -> httpx.Response:
        """Send `request` until an answer comes back, restarting the server when it dies.

        Only for requests that are safe to repeat (GETs, POSTs with an Idempotency-Key).
        """
        while True:
            self.ensure_running()
            try:
                return client.send(request)
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)


@pytest.mark.acceptance
def test_a_job_that_crashes_the_server_fails_after_max_attempts(
    server_factory: ServerFactory, executor_settings: dict[str, object]
) -> None:
    server = server_factory(
        sim_lanes=2, max_attempts=MAX_ATTEMPTS, shutdown_grace_s=2, **executor_settings
    )
    supervisor = Supervisor(server)
    server.start()
    deadline = time.monotonic() + DEADLINE_S
    # The blocker holds both lanes while the others are submitted, so that they all wait in the
    # queue, the normal jobs behind the poison one.
    bodies = [
        sim_training("blocker/data.yaml", gpus=2, sim_seconds=1.0),
        sim_inference("poison.jpg", sim_fail="crash"),
        *(sim_inference(f"normal-{i}.jpg", sim_seconds=0.2) for i in range(5)),
    ]

    with server.client(timeout=5) as client:
        ids = []
        for index, body in enumerate(bodies):
            # The server may die under a request; the key makes a retry return the same job.
            request = client.build_request(
                "POST", "/v1/jobs", json=body, headers={"Idempotency-Key": f"poison-test-{index}"}
            )
            response = supervisor.call(request, client, deadline)
            assert response.status_code == 202, response.text
            ids.append(response.json()["id"])
        blocker_id, poison_id, normal_ids = ids[0], ids[1], ids[2:]
        blocker = client.get(f"/v1/jobs/{blocker_id}").json()
        assert blocker["state"] == "running", "the blocker ended before the others were queued"

        jobs: dict[str, dict[str, Any]] = {}
        while not (
            len(jobs) == len(ids) and all(j["state"] in TERMINAL_STATES for j in jobs.values())
        ):
            assert time.monotonic() < deadline, f"jobs still not done: {jobs}"
            for job_id in ids:
                request = client.build_request("GET", f"/v1/jobs/{job_id}")
                response = supervisor.call(request, client, deadline)
                assert response.status_code == 200, response.text
                jobs[job_id] = response.json()
            time.sleep(0.1)

    poison = jobs[poison_id]
    assert poison["state"] == "failed", poison
    assert poison["error"]["code"] == "interrupted", poison
    assert poison["attempt"] == MAX_ATTEMPTS, poison
    crashes = MAX_ATTEMPTS if executor_settings["executor"] == "threads" else 0
    assert supervisor.exit_codes == [CRASH_EXIT_CODE] * crashes
    assert sim_runs(server.data_dir, poison_id) == []
    assert jobs[blocker_id]["state"] == "succeeded"
    for job_id in normal_ids:
        job = jobs[job_id]
        assert job["state"] == "succeeded", job
        runs = sim_runs(server.data_dir, job_id)
        assert runs[-1] == job["attempt"], (runs, job)
        assert len(runs) == len(set(runs)), (runs, job)
    assert server.running


@pytest.mark.acceptance
def test_a_job_running_beside_the_poison_job_still_succeeds(
    server_factory: ServerFactory, executor_settings: dict[str, object]
) -> None:
    server = server_factory(
        sim_lanes=2, max_attempts=MAX_ATTEMPTS, shutdown_grace_s=2, **executor_settings
    )
    supervisor = Supervisor(server)
    server.start()
    deadline = time.monotonic() + DEADLINE_S
    with server.client(timeout=5) as client:
        bystander = submit(client, sim_inference("bystander.jpg", sim_seconds=2.0, sim_steps=20))
        wait_for(
            lambda: get_job(client, bystander["id"])["state"] == "running",
            timeout=5,
            what="the bystander to run",
        )
        request = client.build_request(
            "POST",
            "/v1/jobs",
            json=sim_inference("poison.jpg", sim_fail="crash"),
            headers={"Idempotency-Key": "poison"},
        )
        poison = supervisor.call(request, client, deadline).json()

        jobs: dict[str, dict[str, Any]] = {}
        while not (len(jobs) == 2 and all(j["state"] in TERMINAL_STATES for j in jobs.values())):
            assert time.monotonic() < deadline, f"jobs still not done: {jobs}"
            for job_id in (bystander["id"], poison["id"]):
                request = client.build_request("GET", f"/v1/jobs/{job_id}")
                jobs[job_id] = supervisor.call(request, client, deadline).json()
            time.sleep(0.1)

    assert jobs[poison["id"]]["state"] == "failed"
    assert jobs[bystander["id"]]["state"] == "succeeded", jobs[bystander["id"]]
