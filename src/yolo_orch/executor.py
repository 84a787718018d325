"""The seam between the dispatcher and where a job's code runs.

Today: worker threads of this process. A distributed engine would implement `Executor` too; the
dispatcher, the API and the store would not change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import anyio
import anyio.to_thread

from yolo_orch.batching import BatchOutcome, run_batch
from yolo_orch.domain import JobResult
from yolo_orch.runners.base import RunContext, Runtime


class Executor(Protocol):
    async def run(self, ctx: RunContext) -> JobResult:
        """Run the job to completion; cancelling the awaiting task abandons the run."""
        ...

    async def run_batch(self, ctxs: Sequence[RunContext]) -> list[BatchOutcome]:
        """Run jobs of one kind that share forward passes on one lane (`batching.run_batch`);
        answer for each job in order."""
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

    async def run_batch(self, ctxs: Sequence[RunContext]) -> list[BatchOutcome]:
        runner = self._runtime.runner(ctxs[0].job.kind)
        return await anyio.to_thread.run_sync(
            run_batch, runner, ctxs, limiter=self._limiter, abandon_on_cancel=True
        )
