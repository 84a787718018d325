"""Connects the server to its Ray cluster: lanes that follow the nodes, and the executor.

This module is where the plug-in starts, so it imports nothing of Ray until `connect` has
prepared the process's environment (`prepare_environment`): Ray reads it once, when imported.
"""

from __future__ import annotations

import logging
import os
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio.to_thread

from yolo_orch.config import Settings
from yolo_orch.dispatch.executor import Executor, NodeInfo
from yolo_orch.dispatch.lanes import Lanes
from yolo_orch.domain import Job
from yolo_orch.files.start_journal import StartJournal
from yolo_orch.ray_cluster.node_runtime import NodeRuntimeSpec
from yolo_orch.ray_cluster.nodes import ClusterWatcher
from yolo_orch.registry.models import ModelRegistry

if TYPE_CHECKING:
    from yolo_orch.ray_cluster.executor import RayExecutor
    from yolo_orch.ray_cluster.node_telemetry import NodeTelemetry

log = logging.getLogger(__name__)


def prepare_environment() -> None:
    """What Ray must find in the environment before anything imports it. Ray's C++ failure signal
    handler takes SIGTERM too, and arms an alarm that aborts the server 3 s later, in the middle
    of its drain: it stays off unless the operator's environment turns it on."""
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")


@dataclass
class RayCluster:
    lanes: Lanes
    watcher: ClusterWatcher
    ray_executor: RayExecutor
    executor: Executor
    """`ray_executor`, with the registry's part of each run done on the server."""
    telemetry: NodeTelemetry

    @property
    def reachable(self) -> bool:
        return self.watcher.reachable

    def node_infos(self) -> list[NodeInfo]:
        return [
            NodeInfo(
                node.name,
                node.address,
                self.ray_executor.node_models.get(node.name, []),
                self.telemetry.readings.get(node.name),
            )
            for node in self.watcher.nodes.values()
        ]


async def connect(
    settings: Settings, models: ModelRegistry, stack: AsyncExitStack, starts: StartJournal
) -> RayCluster:
    prepare_environment()
    import ray  # only now: see `prepare_environment`

    from yolo_orch.ray_cluster.executor import RayExecutor
    from yolo_orch.ray_cluster.node_telemetry import NodeTelemetry
    from yolo_orch.ray_cluster.parcels import InputRules, ServerWeights, TaskBuilder
    from yolo_orch.ray_cluster.registration import RegistersResults

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

    async def weights_of(job: Job) -> ServerWeights | None:
        if job.model_id is None:
            return None
        model = await models.get(job.model_id)
        return ServerWeights(model.id, model.sha256, model.name, model.task, models.path_of(model))

    build_task = TaskBuilder(
        weights_of,
        node_runtime_spec(settings),
        InputRules(
            data_roots=tuple(settings.data_roots),
            max_files=settings.max_files_per_job,
            max_image_pixels=settings.max_image_pixels,
            max_bytes=settings.ray_max_input_bytes,
        ),
        variants_of=models.variants.resolve,
        cache_dir=settings.ray_node_cache_dir,
        cache_models=settings.ray_node_cache_models,
        put=ray.put,
    )
    executor = RayExecutor(
        watcher,
        build_task,
        slots_per_lane=settings.slots_per_lane,
        cancel_grace_s=settings.ray_cancel_grace_s,
        starts=starts,
    )
    stack.push_async_callback(executor.close)  # after the drain, before ray.shutdown
    log.info("connected to the ray cluster: %d node(s)", len(watcher.nodes))
    telemetry = NodeTelemetry(watcher, settings.ray_telemetry_interval_s)
    return RayCluster(lanes, watcher, executor, RegistersResults(executor, models), telemetry)


def node_runtime_spec(settings: Settings) -> NodeRuntimeSpec:
    """The runtime each node builds: the one this server would run."""
    return NodeRuntimeSpec(
        name=settings.runtime,
        model_cache_size=settings.model_cache_size,
        cpu_threads=settings.cpu_threads,
        max_image_pixels=settings.max_image_pixels,
        max_slices_per_image=settings.max_slices_per_image,
        shared_data_roots=tuple(str(root) for root in settings.shared_data_roots),
    )
