"""What every executor owes the API, checked on the real server over HTTP, with threads on this
host and on a Ray cluster of 2 nodes x 2 logical GPUs: a cancel stops a running job and frees
its lanes, a multi-lane job takes all its lanes of one node or none and is not starved by the
single-lane jobs behind it, and an idempotency key returns the same job, across a SIGKILL."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.servers import ServerFactory, get_job, submit
from yolo_orch.testing import sim_inference, sim_runs, sim_training, wait_for, wait_terminal

pytestmark = pytest.mark.acceptance

LANES = 4
"""The threads executor gets as many lanes as the cluster has GPUs."""


def node_of(lane: str) -> str:
    return lane.rpartition("/")[0]


def test_a_cancel_stops_the_running_job_and_frees_its_lanes(
    server_factory: ServerFactory, executor_settings: dict[str, object]
) -> None:
    server = server_factory(sim_lanes=LANES, ray_cancel_grace_s=1.0, **executor_settings)
    server.start()
    with server.client() as client:
        job = submit(client, sim_inference("long.jpg", sim_seconds=60, sim_steps=600))
        wait_for(lambda: get_job(client, job["id"])["progress"], 30, "the job to make progress")
        assert client.post(f"/v1/jobs/{job['id']}/cancel").status_code == 202
        done = wait_terminal(client, job["id"], timeout=15)
        assert done["state"] == "cancelled", done
        assert sim_runs(server.data_dir, job["id"]) == []
        devices = client.get("/v1/devices").json()["devices"]
        assert all(device["busy"] == 0 for device in devices), devices
        after = submit(client, sim_inference("after.jpg", sim_seconds=0.05))
        assert wait_terminal(client, after["id"], timeout=30)["state"] == "succeeded"


def test_a_two_lane_job_takes_one_node_whole_and_is_not_starved(
    server_factory: ServerFactory, executor_settings: dict[str, object]
) -> None:
    server = server_factory(sim_lanes=LANES, **executor_settings)
    server.start()
    small = {"sim_seconds": 0.3, "sim_steps": 2}
    with server.client() as client:
        before = [submit(client, sim_inference(f"b{i}.jpg", **small))["id"] for i in range(LANES)]
        wide = submit(client, sim_training("wide/data.yaml", gpus=2, **small))["id"]
        after = [submit(client, sim_inference(f"a{i}.jpg", **small))["id"] for i in range(12)]
        jobs: dict[str, dict[str, Any]] = {
            job_id: wait_terminal(client, job_id, timeout=60) for job_id in [*before, wide, *after]
        }
    assert {job["state"] for job in jobs.values()} == {"succeeded"}, jobs
    lanes = jobs[wide]["devices"]
    assert len(lanes) == 2, lanes
    assert len({node_of(lane) for lane in lanes}) == 1, lanes
    # it holds lanes of one node as they free: the later jobs get only the others meanwhile
    started_after = sorted(jobs[job_id]["started_at"] for job_id in after)
    assert jobs[wide]["started_at"] < started_after[len(after) // 2], jobs[wide]


def test_an_idempotency_key_returns_the_same_job_across_a_sigkill(
    server_factory: ServerFactory, executor_settings: dict[str, object]
) -> None:
    server = server_factory(sim_lanes=LANES, max_attempts=3, **executor_settings)
    server.start()
    body = sim_inference("once.jpg", sim_seconds=1.0, sim_steps=10)
    with server.client() as client:
        first = submit(client, body, **{"Idempotency-Key": "order-42"})
        wait_for(lambda: get_job(client, first["id"])["state"] == "running", 30, "it to run")
    server.kill()
    server.start()
    with server.client() as client:
        again = client.post("/v1/jobs", json=body, headers={"Idempotency-Key": "order-42"})
        assert again.status_code == 202, again.text
        assert again.json()["id"] == first["id"]
        assert again.headers["Idempotent-Replayed"] == "true"
        done = wait_terminal(client, first["id"], timeout=30)
        assert done["state"] == "succeeded", done
        assert len(client.get("/v1/jobs").json()["jobs"]) == 1
    runs = sim_runs(server.data_dir, first["id"])
    assert runs == [done["attempt"]], runs  # once to success, whether requeued or followed
