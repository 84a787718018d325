"""NVML telemetry and health through the app, with a fake NVML: readings in /v1/devices and
/metrics, and a lane whose GPU reports a fatal state taken out of admission."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import httpx

from tests.conftest import serve, sim_job, wait_terminal
from tests.support.nvml import GPU_IS_LOST, FakeGpu, FakeNvml
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.ops.telemetry import GpuTelemetry


async def test_a_lost_gpu_takes_its_lane_out_of_admission(
    settings_factory: Callable[..., Settings],
) -> None:
    gpus = (FakeGpu(uuid="GPU-0"), FakeGpu(uuid="GPU-1", used=5 << 30))
    settings = settings_factory(lanes=["cuda:0", "cuda:1"], gpu_health_interval_s=0.02)
    app = create_app(settings, telemetry=GpuTelemetry(FakeNvml(*gpus)))
    async with serve(app) as client:
        devices = (await client.get("/v1/devices")).json()["devices"]
        assert [d["memory_used_bytes"] for d in devices] == [2 << 30, 5 << 30]
        assert [d["temperature_c"] for d in devices] == [61, 61]
        assert [d["healthy"] for d in devices] == [True, True]
        metrics = (await client.get("/metrics")).text
        assert 'yolo_orch_gpu_memory_used_bytes{lane="cuda:1"} 5.36870912e+09' in metrics
        assert 'yolo_orch_lane_healthy{lane="cuda:0"} 1.0' in metrics

        gpus[0].failing["nvmlDeviceGetHandleByIndex"] = GPU_IS_LOST
        await _until(client, lambda ready: ready["status"] == "degraded")
        ready = (await client.get("/readyz")).json()
        assert ready["checks"]["all_lanes_healthy"] is False

        jobs = [(await client.post("/v1/jobs", json=sim_job())).json() for _ in range(4)]
        for job in jobs:
            done = await wait_terminal(client, job["id"])
            assert done["devices"] == ["cuda:1"]  # never the lost GPU's lane
        assert 'yolo_orch_lane_healthy{lane="cuda:0"} 0.0' in (await client.get("/metrics")).text

        gpus[0].failing.clear()
        await _until(client, lambda ready: ready["status"] == "ready")


async def _until(client: httpx.AsyncClient, condition: Callable[[dict[str, object]], bool]) -> None:
    async with asyncio.timeout(5):
        while not condition((await client.get("/readyz")).json()):
            await asyncio.sleep(0.02)


async def test_a_job_needing_more_gpus_than_are_healthy_does_not_block_the_rest(
    settings_factory: Callable[..., Settings],
) -> None:
    gpus = (FakeGpu(uuid="GPU-0"), FakeGpu(uuid="GPU-1"))
    gpus[1].failing["nvmlDeviceGetHandleByIndex"] = GPU_IS_LOST
    settings = settings_factory(lanes=["cuda:0", "cuda:1"], gpu_health_interval_s=0.02)
    app = create_app(settings, telemetry=GpuTelemetry(FakeNvml(*gpus)))
    async with serve(app) as client:
        await _until(client, lambda ready: ready["status"] == "degraded")
        wide = {"kind": "training", "model": "sim", "gpus": 2, "params": {"sim_seconds": 0.05}}
        waiting = (await client.post("/v1/jobs", json=wide)).json()
        narrow = (await client.post("/v1/jobs", json=sim_job())).json()
        assert (await wait_terminal(client, narrow["id"]))["devices"] == ["cuda:0"]
        assert (await client.get(f"/v1/jobs/{waiting['id']}")).json()["state"] == "queued"

        gpus[1].failing.clear()
        done = await wait_terminal(client, waiting["id"])
        assert done["devices"] == ["cuda:0", "cuda:1"]
