"""The cluster as lanes: each GPU of each alive node is a lane `<node>/cuda:<i>`, read from Ray
every `interval_s`, so nodes that join or leave add or remove lanes."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread

from yolo_orch.dispatch.lanes import Lanes

log = logging.getLogger(__name__)

LOST_HOLD_S = 60.0
"""How long a node that lost a run stays out while the cluster still calls it alive (its head
notices a dead node only after some missed health checks)."""
NODE_NAME_CHARS = 12
"""A node's lane prefix: the start of its Ray node id, unique in practice and short to read."""


@dataclass(frozen=True)
class ClusterNode:
    node_id: str
    address: str
    gpus: int

    @property
    def name(self) -> str:
        return self.node_id[:NODE_NAME_CHARS]

    def lanes(self, cpu_lanes: bool) -> list[str]:
        if self.gpus:
            return [f"{self.name}/cuda:{i}" for i in range(self.gpus)]
        return [f"{self.name}/cpu"] if cpu_lanes else []


def alive_nodes(raw: Sequence[Mapping[str, Any]]) -> list[ClusterNode]:
    """The alive nodes of `ray.nodes()`, in a stable order (by node id)."""
    nodes = [
        ClusterNode(
            node_id=str(node["NodeID"]),
            address=str(node.get("NodeManagerAddress", "")),
            gpus=int(node.get("Resources", {}).get("GPU", 0)),
        )
        for node in raw
        if node.get("Alive")
    ]
    return sorted(nodes, key=lambda node: node.node_id)


class ClusterWatcher:
    """Keeps `lanes` equal to the lanes of the alive nodes; `reachable` is false while the
    cluster's head does not answer (the lanes stay as they were: their jobs may go on)."""

    def __init__(
        self,
        lanes: Lanes,
        read_nodes: Callable[[], Sequence[Mapping[str, Any]]],
        on_change: Callable[[], None],
        *,
        cpu_lanes: bool,
        interval_s: float,
        timeout_s: float = 10.0,
    ) -> None:
        self._lanes = lanes
        self._read_nodes = read_nodes
        self.on_change = on_change
        self._cpu_lanes = cpu_lanes
        self._interval_s = interval_s
        self._timeout_s = timeout_s
        self.nodes: dict[str, ClusterNode] = {}
        """By node name (the lane prefix)."""
        self.reachable = True
        self._lost: dict[str, float] = {}
        """Node ids that lost a run, and when."""

    def lose(self, name: str) -> None:
        """Take a node that lost a run out of admission at once: the requeued job must not go
        back to it."""
        node = self.nodes.pop(name, None)
        if node is None:
            return
        self._lost[node.node_id] = time.monotonic()
        self._lanes.remove(set(node.lanes(self._cpu_lanes)))
        log.warning("ray node %s lost a run; its lanes are out", name)
        self.on_change()

    def node_of(self, lane_id: str) -> ClusterNode | None:
        return self.nodes.get(lane_id.rpartition("/")[0])

    def update(self, raw: Sequence[Mapping[str, Any]]) -> None:
        alive = alive_nodes(raw)
        now = time.monotonic()
        self._lost = {
            node.node_id: self._lost[node.node_id]
            for node in alive
            if now - self._lost.get(node.node_id, -LOST_HOLD_S) < LOST_HOLD_S
        }
        nodes = {node.name: node for node in alive if node.node_id not in self._lost}
        joined, left = nodes.keys() - self.nodes.keys(), self.nodes.keys() - nodes.keys()
        if not joined and not left:
            return
        gone = {lane for name in left for lane in self.nodes[name].lanes(self._cpu_lanes)}
        self._lanes.remove(gone)
        self._lanes.add(lane for node in nodes.values() for lane in node.lanes(self._cpu_lanes))
        for name in sorted(joined):
            node = nodes[name]
            log.info("ray node %s (%s) joined: %d GPU(s)", name, node.address, node.gpus)
        for name in sorted(left):
            log.warning("ray node %s left; its lanes are gone", name)
        self.nodes = nodes
        self.on_change()

    async def refresh(self) -> None:
        try:
            with anyio.fail_after(self._timeout_s):
                raw = await anyio.to_thread.run_sync(self._read_nodes, abandon_on_cancel=True)
        except Exception as exc:
            if self.reachable:
                log.error("the ray cluster does not answer: %s", exc)
            self.reachable = False
            return
        if not self.reachable:
            log.info("the ray cluster answers again")
        self.reachable = True
        self.update(raw)

    async def run(self) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(self._interval_s)
