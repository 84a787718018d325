"""GET /v1/history: what the server did over time (`ops/activity.py`), and the task that takes a
reading each second: jobs running and queued (the store's counts table, one small read), lane
turns taken, 429 refusals, the host's CPU, memory, disk and load, and on a Ray cluster each node's
last telemetry."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal

import anyio.to_thread
from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from yolo_orch.api.deps import ServicesDep
from yolo_orch.api.prometheus import Metrics
from yolo_orch.dispatch.executor import NodeInfo
from yolo_orch.dispatch.lanes import Lanes
from yolo_orch.domain import JobState
from yolo_orch.ops.activity import MINUTE_POINTS, SECOND_POINTS, Tick
from yolo_orch.ops.host_readings import HostReadings
from yolo_orch.ops.telemetry import NodeReading
from yolo_orch.store.base import JobStore

TICK_S = 1.0

router = APIRouter(prefix="/v1/history", tags=["health"])


class ActivitySampler:
    def __init__(
        self,
        store: JobStore,
        lanes: Lanes,
        metrics: Metrics,
        host: HostReadings,
        nodes: Callable[[], list[NodeInfo]] | None = None,
    ):
        """`nodes`: on a Ray cluster, its nodes with their last telemetry (read on each node by
        the cluster's own sampler: nothing is asked of the nodes here)."""
        self._store = store
        self._lanes = lanes
        self._metrics = metrics
        self._host = host
        self._nodes = nodes
        self._refused: int | None = None

    async def sample_once(self) -> None:
        counts = await self._store.counts()
        host = await anyio.to_thread.run_sync(self._host.read)  # file reads: off the loop
        refused_total = self._metrics.refused_total
        refused = 0 if self._refused is None else refused_total - self._refused
        self._refused = refused_total
        self._metrics.activity.record(
            Tick(
                at=time.time(),
                running=sum(n for (state, _), n in counts.items() if state == JobState.RUNNING),
                queue_depth=sum(n for (state, _), n in counts.items() if state == JobState.QUEUED),
                refused=refused,
                lanes_busy=sum(lane.busy for lane in self._lanes),
                lanes_slots=sum(lane.slots for lane in self._lanes),
                host=host,
                nodes={} if self._nodes is None else _node_readings(self._nodes()),
            )
        )

    async def run(self) -> None:
        """A reading each `TICK_S` until cancelled; the next is due a tick after the last was
        due, so slow readings do not make the seconds drift."""
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            await self.sample_once()
            due = max(due + TICK_S, loop.time())
            await asyncio.sleep(due - loop.time())


def _node_readings(nodes: list[NodeInfo]) -> dict[str, dict[str, float | None]]:
    return {node.name: _readings(node.reading) for node in nodes}


def _readings(reading: NodeReading | None) -> dict[str, float | None]:
    if reading is None:  # not read yet
        return {"load_1m": None, "memory_percent": None, "gpu_percent": None}
    used, total = reading.memory_used_bytes, reading.memory_total_bytes
    utilisations = [
        g.utilization_percent for g in reading.gpus if g.utilization_percent is not None
    ]
    return {
        "load_1m": reading.load_1m,
        "memory_percent": 100.0 * used / total if used is not None and total else None,
        "gpu_percent": sum(utilisations) / len(utilisations) if utilisations else None,
    }


class LatencyPublic(BaseModel):
    p50: float | None
    p99: float | None
    n: int = Field(description="Runs that ended in the point (quantiles of at most 1000).")


class HistoryPoint(BaseModel):
    at: float = Field(description="Unix time, seconds: the point's start.")
    started: int = Field(description="Jobs started in it.")
    finished: int = Field(description="Runs that ended in it (succeeded, failed, cancelled).")
    refused: int = Field(description="Submissions refused with 429 (queue full) in it.")
    queue_depth: float = Field(description="Jobs queued: the mean over the point.")
    queue_depth_max: int
    utilisation: float | None = Field(
        description="Lane turns taken over lane turns there are (0-1), the mean over the point."
    )
    utilisation_max: float | None
    host: dict[str, float | None] = Field(
        description="`cpu_percent`, `memory_percent`, `disk_percent` (of the data directory's "
        "disk), `load_1m`; null where the host does not say (no /proc)."
    )
    nodes: dict[str, dict[str, float | None]] = Field(
        description="With the Ray executor, each node's readings by its name: `load_1m`, "
        "`memory_percent`, `gpu_percent` (the mean NVML utilisation of its GPUs; null without "
        "NVML), as the node read them last (`ray_telemetry_interval_s`). Empty on one host."
    )
    latency_s: dict[str, LatencyPublic] = Field(
        description="By kind: run times (start to end of the last attempt) of the runs that "
        "ended in the point."
    )


class History(BaseModel):
    resolution: Literal["1s", "1m"]
    capacity: int = Field(description="Points kept at this resolution (older ones are dropped).")
    points: list[HistoryPoint] = Field(description="Oldest first.")


@router.get(
    "",
    response_model=History,
    summary="What the server did over time",
    description="Each second for the last 15 minutes (`1s`), or each minute for the last 24 "
    "hours (`1m`, the last point the minute under way): jobs started and ended, queue depth, "
    "429 refusals, run-time p50 and p99 by kind, lane utilisation, the host's CPU, memory, "
    "disk and load, and on a Ray cluster each node's load, memory and GPU utilisation. Kept in "
    "memory only: a restart forgets it.",
)
async def history(
    services: ServicesDep,
    resolution: Annotated[Literal["1s", "1m"], Query()] = "1s",
) -> dict[str, Any]:
    points = services.metrics.activity.points(resolution)
    return {
        "resolution": resolution,
        "capacity": SECOND_POINTS if resolution == "1s" else MINUTE_POINTS,
        "points": [point.as_dict() for point in points],
    }
