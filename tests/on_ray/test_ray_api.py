"""The server with `executor = "ray"` on a 2 x 2-GPU cluster: lanes from the nodes, jobs pinned
to one node, a node lost mid-job, a fatal CUDA error on a node, each node's telemetry. (Cancel,
the poison job and no starvation are in `tests/acceptance`, over both executors.)"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.conftest import serve, sim_job, wait_terminal
from yolo_orch.app import create_app
from yolo_orch.config import Settings

pytestmark = pytest.mark.ray


def ray_settings(settings_factory: Callable[..., Settings], cluster: Any, **more: Any) -> Settings:
    return settings_factory(
        executor="ray",
        ray_address=cluster.address,
        ray_poll_interval_s=0.2,
        ray_cancel_grace_s=1.0,
        ray_namespace=f"test-{uuid.uuid4().hex}",
        **more,
    )


def node_of(lane: str) -> str:
    return lane.rpartition("/")[0]


async def wait_state(
    client: httpx.AsyncClient, job_id: str, state: str, deadline_s: float = 20.0
) -> dict[str, Any]:
    async with asyncio.timeout(deadline_s):
        while True:
            job: dict[str, Any] = (await client.get(f"/v1/jobs/{job_id}")).json()
            if job["state"] == state:
                return job
            await asyncio.sleep(0.05)


def training(gpus: int, **params: Any) -> dict[str, Any]:
    return {
        "kind": "training",
        "model": "sim",
        "dataset": "data.yaml",
        "gpus": gpus,
        "params": {"sim_seconds": 0.1, "sim_steps": 2, **params},
    }


async def test_lanes_are_the_gpus_of_the_nodes_and_jobs_run_there(
    settings_factory: Callable[..., Settings], cluster: Any
) -> None:
    async with serve(create_app(ray_settings(settings_factory, cluster))) as client:
        listing = (await client.get("/v1/devices")).json()
        lanes = [device["id"] for device in listing["devices"]]
        by_node = {node["name"]: node["lanes"] for node in listing["nodes"] if node["lanes"]}
        assert sorted(lane for node_lanes in by_node.values() for lane in node_lanes) == sorted(
            lanes
        )
        nodes = {node_of(lane) for lane in lanes}
        assert len(nodes) == 2
        assert sorted(lane.rpartition("/")[2] for lane in lanes) == [
            "cuda:0",
            "cuda:0",
            "cuda:1",
            "cuda:1",
        ]

        job = (await client.post("/v1/jobs", json=sim_job())).json()
        done = await wait_terminal(client, job["id"], deadline_s=30)
        assert done["state"] == "succeeded", done
        assert node_of(done["devices"][0]) in nodes
        assert (done["progress"]["done"], done["progress"]["total"]) == (2, 2)
        result = (await client.get(f"/v1/jobs/{job['id']}/result")).json()
        assert [image["source"] for image in result["images"]] == ["a.jpg", "b.jpg"]
        ready = (await client.get("/readyz")).json()
        assert ready["status"] == "ready", ready
        assert ready["checks"]["cluster_reachable"]


async def test_a_two_gpu_training_never_spans_nodes(
    settings_factory: Callable[..., Settings], cluster: Any
) -> None:
    async with serve(create_app(ray_settings(settings_factory, cluster))) as client:
        too_many = await client.post("/v1/jobs", json=training(3))
        assert too_many.status_code == 422, too_many.text
        assert too_many.json()["code"] == "too_many_gpus"

        bodies = [training(2) if i % 2 else sim_job() for i in range(8)]
        ids = [(await client.post("/v1/jobs", json=body)).json()["id"] for body in bodies]
        for job_id, body in zip(ids, bodies, strict=True):
            done = await wait_terminal(client, job_id, deadline_s=60)
            assert done["state"] == "succeeded", done
            assert len(done["devices"]) == body.get("gpus", 1)
            assert len({node_of(lane) for lane in done["devices"]}) == 1, done["devices"]


@pytest.mark.parametrize("graceful", [True, False], ids=["removed", "raylet-sigkill"])
async def test_a_job_on_a_node_that_is_lost_runs_again_elsewhere(
    settings_factory: Callable[..., Settings], own_cluster: Any, graceful: bool
) -> None:
    async with serve(create_app(ray_settings(settings_factory, own_cluster))) as client:
        body = sim_job(params={"sim_seconds": 30, "sim_steps": 300})
        job = await wait_state(
            client, (await client.post("/v1/jobs", json=body)).json()["id"], "running"
        )
        lost = node_of(job["devices"][0])
        [node] = [n for n in own_cluster.list_all_nodes() if n.node_id.startswith(lost)]
        own_cluster.remove_node(node, allow_graceful=graceful)

        async with asyncio.timeout(40):
            while True:
                again = await wait_state(client, job["id"], "running", deadline_s=30)
                if again["devices"] and node_of(again["devices"][0]) != lost:
                    break
                await asyncio.sleep(0.05)
        assert again["attempt"] == 2
        await client.post(f"/v1/jobs/{job['id']}/cancel")
        devices = (await client.get("/v1/devices")).json()["devices"]
        assert {node_of(device["id"]) for device in devices} == {node_of(again["devices"][0])}


async def test_a_fatal_cuda_error_on_a_node_fails_the_job_not_the_server(
    settings_factory: Callable[..., Settings], cluster: Any
) -> None:
    async with serve(create_app(ray_settings(settings_factory, cluster))) as client:
        body = sim_job(params={"sim_fail": "cuda_fatal"})
        fatal = await wait_terminal(
            client, (await client.post("/v1/jobs", json=body)).json()["id"], deadline_s=30
        )
        assert (fatal["state"], fatal["error"]["code"]) == ("failed", "runtime_error")
        assert "fatal CUDA error on node" in fatal["error"]["message"]
        after = (await client.post("/v1/jobs", json=sim_job())).json()
        assert (await wait_terminal(client, after["id"], deadline_s=30))["state"] == "succeeded"


async def test_each_node_reports_its_own_telemetry_in_devices(
    settings_factory: Callable[..., Settings], cluster: Any
) -> None:
    settings = ray_settings(settings_factory, cluster, ray_telemetry_interval_s=0.2)
    async with serve(create_app(settings)) as client:
        async with asyncio.timeout(30):
            while True:
                nodes = (await client.get("/v1/devices")).json()["nodes"]
                if nodes and all(node["read_at"] is not None for node in nodes):
                    break
                await asyncio.sleep(0.1)
            # The history's next second has each node's readings too.
            while True:
                point = (await client.get("/v1/history")).json()["points"][-1]
                if len(point["nodes"]) == 3 and all(
                    readings["load_1m"] is not None for readings in point["nodes"].values()
                ):
                    break
                await asyncio.sleep(0.2)

    assert sorted(point["nodes"]) == sorted(node["name"] for node in nodes)
    for readings in point["nodes"].values():
        assert 0 < (readings["memory_percent"] or 0) < 100
        assert readings["gpu_percent"] is None  # no NVML on these nodes
    assert len(nodes) == 3  # the head (no GPUs, no lanes) and the two 2-GPU workers
    for node in nodes:
        assert node["load_1m"] >= 0
        assert 0 < node["memory_used_bytes"] < node["memory_total_bytes"]
        # The cluster's GPUs are logical: no NVML on these nodes, so no GPU readings
        assert node["gpus"] == []
