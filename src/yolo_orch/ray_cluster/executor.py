"""`RayExecutor`: runs a job on the node its lanes belong to, as a Ray task pinned there
(`NodeAffinitySchedulingStrategy(soft=False)`, `num_gpus=k`, `num_cpus=0`, `max_retries=0`),
so Ray never places, queues or re-runs anything behind the store's back."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import ray
from ray.exceptions import (
    NodeDiedError,
    RayError,
    RayTaskError,
    TaskCancelledError,
    TaskUnschedulableError,
)
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from yolo_orch.batching import BatchOutcome
from yolo_orch.domain import ErrorCode, JobError, JobResult
from yolo_orch.errors import JobCancelled, RunLost, YoloOrchError
from yolo_orch.ray_cluster.node_side import (
    Failed,
    FilesBack,
    Finished,
    Logged,
    ModelsHeld,
    NodeTask,
    Progressed,
    Stopped,
    ping,
    run_on_node,
    travels,
)
from yolo_orch.ray_cluster.nodes import ClusterNode, ClusterWatcher
from yolo_orch.runners.base import RunContext

log = logging.getLogger(__name__)

BuildTask = Callable[[RunContext], Awaitable[NodeTask]]
"""What a run is handed on its node (`parcels.TaskBuilder`)."""

_NODE_GONE = (NodeDiedError, TaskUnschedulableError)
"""What Ray raises for a run whose node is gone (or that can no longer be placed there)."""
_CANCEL_POLL_S = 0.05
_PROBE_TIMEOUT_S = 10.0


class NodeJobFailed(YoloOrchError):
    """How a run failed on its node, with the code the node's runner gave."""

    def __init__(self, error: JobError) -> None:
        super().__init__(error.message)
        self.code = error.code


class RayExecutor:
    def __init__(
        self,
        cluster: ClusterWatcher,
        build_task: BuildTask,
        *,
        slots_per_lane: int,
        cancel_grace_s: float,
    ) -> None:
        self._cluster = cluster
        self._build_task = build_task
        self._slots = slots_per_lane
        self._grace_s = cancel_grace_s
        self.node_models: dict[str, list[str]] = {}
        """By node name: the sha256s each node said it keeps."""

    async def run_batch(self, ctxs: Sequence[RunContext]) -> list[BatchOutcome]:
        """Ray lanes are not batched (no `batch_max_images` names their kind,
        `<node>/cuda`), so no forward pass is shared: any batch handed here runs its jobs one
        after another, each answering for itself."""
        outcomes: list[BatchOutcome] = []
        for ctx in ctxs:
            try:
                outcomes.append(await self.run(ctx))
            except Exception as exc:  # this job's own end; the others still run
                outcomes.append(exc)
        return outcomes

    async def run(self, ctx: RunContext) -> JobResult:
        node = self._cluster.node_of(ctx.devices[0])
        if node is None:
            raise RunLost(f"the node of lane {ctx.devices[0]} left the cluster")
        task = await self._build_task(ctx)
        gpus = 0.0 if ctx.devices[0].endswith("/cpu") else len(ctx.devices) / self._slots
        stream = run_on_node.options(
            num_gpus=gpus,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
            name=f"yolo-orch job {ctx.job.id}",
        ).remote(task)
        canceller = asyncio.create_task(self._cancel_when_asked(ctx, stream))
        try:
            return await self._follow(ctx, node, stream)
        except asyncio.CancelledError:  # abandoned (a drain): the node's work ends with it
            await anyio.to_thread.run_sync(lambda: ray.cancel(stream, force=True))
            raise
        finally:
            canceller.cancel()

    async def _follow(self, ctx: RunContext, node: ClusterNode, stream: Any) -> JobResult:
        try:
            async for ref in stream:
                event = await ref
                if isinstance(event, Progressed):
                    ctx.report_progress(event.progress)
                elif isinstance(event, Logged):
                    log.log(event.level, "[%s] %s", node.name, event.message)
                elif isinstance(event, ModelsHeld):
                    self.node_models[node.name] = event.sha256s
                elif isinstance(event, FilesBack):
                    await anyio.to_thread.run_sync(_write_folder, ctx.workdir, event.files)
                elif isinstance(event, Finished):
                    return event.result
                elif isinstance(event, Failed):
                    raise NodeJobFailed(_on_node(event.error, node))
                elif isinstance(event, Stopped):
                    raise JobCancelled()
        except TaskCancelledError:
            raise JobCancelled() from None
        except RayTaskError as exc:  # our task code failed, not the node
            raise RuntimeError(f"the job's task failed on node {node.name}: {exc}") from None
        except RayError as exc:
            if ctx.should_cancel():
                raise JobCancelled() from None
            # Its worker died, maybe with its node (the head notices a killed raylet only after
            # missed health checks): ask the node before the job can be admitted there again.
            if isinstance(exc, _NODE_GONE) or not await _answers(node):
                self._cluster.lose(node.name)
            raise RunLost(f"its run on node {node.name} was lost: {type(exc).__name__}") from None
        raise RunLost(f"its run on node {node.name} ended without an outcome")

    async def _cancel_when_asked(self, ctx: RunContext, stream: Any) -> None:
        """A cancel (or the watchdog) first asks the runner to stop at its next safe point,
        then, after the grace period, kills the node's worker process."""
        while not ctx.should_cancel():  # noqa: ASYNC110 - a flag of the runner's, polled
            await asyncio.sleep(_CANCEL_POLL_S)
        await anyio.to_thread.run_sync(lambda: ray.cancel(stream))
        await asyncio.sleep(self._grace_s)
        log.warning("job %s did not stop within %gs; killing its worker", ctx.job.id, self._grace_s)
        await anyio.to_thread.run_sync(lambda: ray.cancel(stream, force=True))


async def _answers(node: ClusterNode) -> bool:
    probe = ping.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False)
    ).remote()
    try:
        with anyio.fail_after(_PROBE_TIMEOUT_S):
            return bool(await probe)
    except (RayError, TimeoutError):
        ray.cancel(probe, force=True)
        return False


def _on_node(error: JobError, node: ClusterNode) -> JobError:
    """A sticky CUDA error poisoned the node's worker (which then exits), not this server:
    it must not make the server restart as `cuda_fatal` does on one host."""
    if error.code != ErrorCode.CUDA_FATAL:
        return error
    message = f"a fatal CUDA error on node {node.name} (its worker restarts): {error.message}"
    return JobError(ErrorCode.RUNTIME_ERROR, message)


def _write_folder(folder: Path, files: dict[str, bytes]) -> None:
    root = folder.resolve()
    for name, data in files.items():
        target = (folder / name).resolve()
        if not target.is_relative_to(root) or not travels(name):
            log.warning("a node sent back %r, outside what it may write; dropped", name)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
        partial.write_bytes(data)
        partial.replace(target)
