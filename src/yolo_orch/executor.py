"""The seam between the dispatcher and where a job's code runs.

Today: worker threads of this process. A distributed engine would implement `Executor` too; the
dispatcher, the API and the store would not change.
"""

from __future__ import annotations

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
