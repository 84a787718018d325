"""The seam between the dispatcher and where a job's code runs.

`ThreadExecutor`: worker threads of this process. `ray_cluster.RayExecutor` implements `Executor`
too, on a Ray cluster's nodes; the dispatcher, the API and the store do not change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import anyio
import anyio.to_thread

from yolo_orch.domain import JobResult
from yolo_orch.runners.base import RunContext, Runtime


class Executor(Protocol):
    async def run(self, ctx: RunContext) -> JobResult:
        """Run the job to completion; cancelling the awaiting task abandons the run."""
        ...


class ThreadExecutor:
    """Runs each job in a worker thread, at most `capacity` at once (the total lane slots)."""

    def __init__(self, runtime: Runtime, capacity: int) -> None:
        self._runtime = runtime
        self._limiter = anyio.CapacityLimiter(capacity)

    async def run(self, ctx: RunContext) -> JobResult:
        runner = self._runtime.runner(ctx.job.kind)
        return await anyio.to_thread.run_sync(
            runner.run, ctx, limiter=self._limiter, abandon_on_cancel=True
        )


@dataclass(frozen=True)
class NodeInfo:
    """A cluster node as an executor on several nodes reports it."""

    name: str
    address: str
    models: list[str]
    """sha256s of the model files the node keeps."""


class ClusterView(Protocol):
    """What the API may read of an executor that runs jobs on a cluster's nodes."""

    @property
    def reachable(self) -> bool:
        """False while the cluster does not answer: jobs queue, none starts."""
        ...

    def node_infos(self) -> list[NodeInfo]: ...
