"""Connects the server to its Ray cluster: lanes that follow the nodes, and the executor."""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import anyio.to_thread
import ray

from yolo_orch.admission import Lanes
from yolo_orch.config import Settings
from yolo_orch.domain import Job
from yolo_orch.executor import NodeInfo
from yolo_orch.ray_cluster.executor import RayExecutor
from yolo_orch.ray_cluster.nodes import ClusterWatcher
from yolo_orch.registry import ModelRegistry

log = logging.getLogger(__name__)


@dataclass
class RayCluster:
    lanes: Lanes
    watcher: ClusterWatcher
    executor: RayExecutor

    @property
    def reachable(self) -> bool:
        return self.watcher.reachable

    def node_infos(self) -> list[NodeInfo]:
        return [
            NodeInfo(node.name, node.address, self.executor.node_models.get(node.name, []))
            for node in self.watcher.nodes.values()
        ]


async def connect(settings: Settings, models: ModelRegistry, stack: AsyncExitStack) -> RayCluster:
    if settings.runtime != "simulated":
        raise RuntimeError(
            'executor = "ray" runs the simulated runtime only, for now: set runtime = "simulated"'
        )
    address = settings.ray_address or None
    await anyio.to_thread.run_sync(
        lambda: ray.init(
            address=address,
            namespace=settings.ray_namespace,
            configure_logging=False,
            log_to_driver=False,
        )
    )
    stack.callback(ray.shutdown)
    lanes = Lanes([], settings.slots_per_lane, dynamic=True)
    watcher = ClusterWatcher(
        lanes,
        ray.nodes,
        on_change=lambda: None,  # the dispatcher's wake-up, once there is a dispatcher
        cpu_lanes=settings.ray_cpu_lanes,
        interval_s=settings.ray_poll_interval_s,
    )
    await watcher.refresh()

    async def weights_of(job: Job) -> tuple[str, str, Path] | None:
        if job.model_id is None:
            return None
        model = await models.get(job.model_id)
        return model.sha256, model.name, models.path_of(model)

    executor = RayExecutor(
        watcher,
        weights_of,
        runtime=settings.runtime,
        slots_per_lane=settings.slots_per_lane,
        cache_dir=settings.ray_node_cache_dir,
        cache_models=settings.ray_node_cache_models,
        cancel_grace_s=settings.ray_cancel_grace_s,
    )
    stack.push_async_callback(executor.close)  # after the drain, before ray.shutdown
    log.info("connected to the ray cluster: %d node(s)", len(watcher.nodes))
    return RayCluster(lanes, watcher, executor)
