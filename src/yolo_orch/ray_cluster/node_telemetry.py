"""Each node's telemetry, read on the node: a small task pinned to every alive node, every
`interval_s`, reads its GPUs through NVML (`telemetry.GpuTelemetry`, as on one host) and its load
and memory; `/v1/devices` shows the last reading of each node."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path

import anyio
import anyio.to_thread
import ray
from ray.exceptions import RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from yolo_orch.ops.telemetry import GpuReading, GpuTelemetry, NodeReading
from yolo_orch.ray_cluster.nodes import ClusterNode, ClusterWatcher

log = logging.getLogger(__name__)

_MEMINFO = Path("/proc/meminfo")


@ray.remote(num_cpus=0, max_retries=0)
def read_node() -> NodeReading:
    telemetry = GpuTelemetry()
    try:
        gpus = tuple(
            telemetry.read(index) or GpuReading() for index in range(telemetry.device_count())
        )
    finally:
        telemetry.close()
    used, total = _memory()
    return NodeReading(gpus, os.getloadavg()[0], used, total, time.time())


def _memory() -> tuple[int | None, int | None]:
    """Used (total less available) and total bytes, from /proc/meminfo; None elsewhere."""
    try:
        fields = dict(line.split(":", 1) for line in _MEMINFO.read_text().splitlines())
        total = int(fields["MemTotal"].split()[0]) * 1024
        available = int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return None, None
    return total - available, total


class NodeTelemetry:
    """The last reading of each alive node (by node name); a node that does not answer within
    `timeout_s` keeps its previous reading, and one that left loses it."""

    def __init__(self, watcher: ClusterWatcher, interval_s: float, timeout_s: float = 10.0):
        self._watcher = watcher
        self._interval_s = interval_s
        self._timeout_s = timeout_s
        self.readings: dict[str, NodeReading] = {}

    async def refresh(self) -> None:
        nodes = list(self._watcher.nodes.values())
        readings = await asyncio.gather(*(self._read(node) for node in nodes))
        fresh = {node.name: r for node, r in zip(nodes, readings, strict=True) if r is not None}
        self.readings = {
            name: fresh.get(name) or self.readings[name]
            for name in self._watcher.nodes
            if name in fresh or name in self.readings
        }

    async def run(self) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(self._interval_s)

    async def _read(self, node: ClusterNode) -> NodeReading | None:
        pinned = NodeAffinitySchedulingStrategy(node.node_id, soft=False)
        ref = read_node.options(scheduling_strategy=pinned).remote()
        try:
            with anyio.fail_after(self._timeout_s):
                reading: NodeReading = await ref
                return reading
        except (RayError, TimeoutError) as exc:
            log.debug("no telemetry from ray node %s: %s", node.name, exc)
            await anyio.to_thread.run_sync(lambda: ray.cancel(ref, force=True))
            return None
