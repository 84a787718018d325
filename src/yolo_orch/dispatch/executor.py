"""The seam between the dispatcher and where a job's code runs.

`ThreadExecutor`: worker threads of this process. `ray_cluster.RayExecutor` implements `Executor`
too, on a Ray cluster's nodes; the dispatcher, the API and the store do not change.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Protocol, TypeVar

import anyio
import anyio.to_thread

from yolo_orch.dispatch.batching import is_stream
from yolo_orch.domain import Job, JobResult
from yolo_orch.files.start_journal import StartJournal
from yolo_orch.ops.telemetry import NodeReading
from yolo_orch.runners.base import BatchOutcome, RunContext, Runtime, run_batch

_A = TypeVar("_A")
_R = TypeVar("_R")


class Executor(Protocol):
    starts_unclaimed: bool
    """True: `run` and `run_batch` may be called while the jobs' claims are still being
    committed (the outcome is recorded only after them), because each run notes its start in
    the `StartJournal` first: the next start completes a claim that a crash cut short (and on
    a cluster, where a run outlives the server, re-attaches the run through it)."""

    async def run(self, ctx: RunContext) -> JobResult:
        """Make the job's workdir and run the job to completion; cancelling the awaiting task
        abandons the run."""
        ...

    async def run_batch(self, ctxs: Sequence[RunContext]) -> list[BatchOutcome]:
        """Run jobs of one kind that share forward passes on one lane (`batching.run_batch`);
        answer for each job in order."""
        ...

    async def surviving(self, jobs: Sequence[Job]) -> set[str]:
        """At start-up, of the jobs a previous server left RUNNING: those whose runs went on
        without it. `run` of such a job follows its run rather than starting another."""
        ...

    async def release(self, job_id: str) -> None:
        """The job's outcome is committed (or it went back to the queue): forget its run."""
        ...


class ThreadExecutor:
    """Runs each job in a worker thread, at most `capacity` at once (the total lane slots).
    With `starts`, each run is noted there before it starts, and may start unclaimed."""

    def __init__(
        self,
        runtime: Runtime,
        capacity: int,
        starts: StartJournal | None = None,
        *,
        stream_capacity: int = 0,
    ) -> None:
        """`stream_capacity`: the streams the lanes take at once; each holds a thread of its
        own for its whole run, apart from the `capacity` threads of the lanes' turns."""
        self._runtime = runtime
        self._limiter = anyio.CapacityLimiter(capacity)
        self._stream_limiter = anyio.CapacityLimiter(max(1, stream_capacity))
        self._starts = starts
        self.starts_unclaimed = starts is not None

    async def run(self, ctx: RunContext) -> JobResult:
        runner = self._runtime.runner(ctx.job.kind)
        return await anyio.to_thread.run_sync(
            self._in_workdirs,
            runner.run,
            [ctx],
            ctx,
            limiter=self._stream_limiter if is_stream(ctx.job) else self._limiter,
            abandon_on_cancel=True,
        )

    async def run_batch(self, ctxs: Sequence[RunContext]) -> list[BatchOutcome]:
        runner = self._runtime.runner(ctxs[0].job.kind)
        return await anyio.to_thread.run_sync(
            self._in_workdirs,
            partial(run_batch, runner),
            ctxs,
            ctxs,
            limiter=self._limiter,
            abandon_on_cancel=True,
        )

    def _in_workdirs(self, work: Callable[[_A], _R], ctxs: Sequence[RunContext], arg: _A) -> _R:
        """In the worker thread: the start noted, the jobs' folders, then the work (one thread
        hop for all)."""
        if self._starts is not None:
            self._starts.note(ctxs)
        for ctx in ctxs:
            with contextlib.suppress(FileExistsError):  # a folder made already needs no stat
                ctx.workdir.mkdir(parents=True)
        return work(arg)

    async def surviving(self, jobs: Sequence[Job]) -> set[str]:
        """None: a thread's run ends with its process."""
        return set()

    async def release(self, job_id: str) -> None:
        pass


@dataclass(frozen=True)
class NodeInfo:
    """A cluster node as an executor on several nodes reports it."""

    name: str
    address: str
    models: list[str]
    """sha256s of the model files, and manifest digests of the variants, the node keeps."""
    reading: NodeReading | None = None
    """Its last telemetry, read on the node; None before the first."""


class ClusterView(Protocol):
    """What the API may read of an executor that runs jobs on a cluster's nodes."""

    @property
    def reachable(self) -> bool:
        """False while the cluster does not answer: jobs queue, none starts."""
        ...

    def node_infos(self) -> list[NodeInfo]: ...
