"""`RayExecutor`: runs a job on the node its lanes belong to, in a detached actor pinned there
(`NodeAffinitySchedulingStrategy(soft=False)`, `num_cpus=0`, no restarts): its lane's warm
actor for inference, a job actor (made ahead of it, or kept from the last job on its lanes) for
any other kind (`hosts.py`). Ray never places, queues or re-runs anything behind the store's
back, and a run outlives the server: a server that comes back follows it again (`surviving`)
and lets it go once its outcome is committed (`release`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path

import anyio
import anyio.to_thread
import ray
from ray.exceptions import (
    ActorUnschedulableError,
    NodeDiedError,
    RayError,
    RayTaskError,
)
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from yolo_orch.domain import Job, JobError, JobResult
from yolo_orch.errors import ErrorCode, JobCancelled, RunLost, YoloOrchError
from yolo_orch.files.start_journal import StartJournal
from yolo_orch.ray_cluster.actors import ping
from yolo_orch.ray_cluster.hosts import Host, Hosts
from yolo_orch.ray_cluster.node_side import (
    Event,
    Failed,
    FilesBack,
    Finished,
    Logged,
    ModelsHeld,
    NodeTask,
    Progressed,
    Stopped,
    travels,
)
from yolo_orch.ray_cluster.nodes import ClusterNode, ClusterWatcher
from yolo_orch.ray_cluster.stops import Stops
from yolo_orch.runners.base import BatchOutcome, RunContext

log = logging.getLogger(__name__)

BuildTask = Callable[[RunContext], Awaitable[NodeTask]]
"""What a run is handed on its node (`parcels.TaskBuilder`)."""

_NODE_GONE = (NodeDiedError, ActorUnschedulableError)
"""What Ray raises for a run whose node is gone (or that can no longer be placed there)."""
_STOPS_LOOK_S = 0.01
"""How often the one timer of `Stops` looks at the running jobs' stop flags."""
_EVENTS_WAIT_S = 2.0
"""How long one poll of a run's events may wait on the node for the next."""
_EVENTS_GATHER_S = 0.25
"""How long a poll that has events waits for more before it answers: progress is advisory (the
dispatcher writes it every `progress_interval_s`, 0.25 s by default), and the ending is never
held back. Shorter, a run that ends just after a poll answered with its progress waits for
the next poll's round trip."""
_PROBE_TIMEOUT_S = 10.0


class NodeJobFailed(YoloOrchError):
    """How a run failed on its node, with the code the node's runner gave."""

    def __init__(self, error: JobError, tampered_variant: str | None = None) -> None:
        super().__init__(error.message)
        self.code = ErrorCode(error.code)
        self.tampered_variant = tampered_variant
        """The id of the variant whose files failed their fingerprints on the node."""


class RayExecutor:
    def __init__(
        self,
        cluster: ClusterWatcher,
        build_task: BuildTask,
        *,
        slots_per_lane: int,
        cancel_grace_s: float,
        starts: StartJournal | None = None,
    ) -> None:
        """With `starts`, each new run is noted there before its task leaves, and may start
        unclaimed: a server that dies before the claim commits completes it from the journal
        at its next start, and re-attaches the run through it."""
        self._cluster = cluster
        self._build_task = build_task
        self._starts = starts
        self.starts_unclaimed = starts is not None
        self._grace_s = cancel_grace_s
        self.node_models: dict[str, list[str]] = {}
        """By node name: the sha256s (and variant digests) each node said it keeps."""
        self._hosts = Hosts(cluster, slots_per_lane)
        self._stops = Stops(_STOPS_LOOK_S)
        self._attachable: set[str] = set()
        """Jobs of a previous server whose runs go on: the next `run` of each follows it."""

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
        job = ctx.job
        node = self._cluster.node_of(ctx.devices[0])
        if node is None:
            raise RunLost(f"the node of lane {ctx.devices[0]} left the cluster")
        task = None
        if job.id not in self._attachable:
            task = await self._build_task(ctx)
            if ctx.should_cancel():  # cancelled before its claim committed: never sent
                raise JobCancelled()
            if self._starts is not None:
                # One append to an open file, not synced: far less than a thread hop here.
                self._starts.note([ctx])
        self._attachable.discard(job.id)
        host = await self._hosts.host_for(job, ctx.devices, node)
        # Abandoned (a drain), the run goes on in its actor: the next start follows it.
        with self._stops.watching(ctx.should_cancel, partial(self._stop, ctx, host)):
            return await self._follow(ctx, node, host, task)

    async def surviving(self, jobs: Sequence[Job]) -> set[str]:
        survivors = await self._hosts.surviving(jobs)
        self._attachable |= survivors
        return survivors

    async def release(self, job_id: str) -> None:
        self._attachable.discard(job_id)
        await self._hosts.release(job_id)

    async def close(self) -> None:
        """At a graceful stop, after the drain: the idle lane actors go."""
        await self._hosts.close()

    async def _follow(
        self, ctx: RunContext, node: ClusterNode, host: Host, task: NodeTask | None
    ) -> JobResult:
        """Long polls of the run's events, each from the first not seen yet: the first poll
        brings the task (unless the run goes on from an earlier server), so the run starts."""
        job, since = ctx.job, 0
        try:
            while True:
                events = await host.actor.events.remote(
                    task, job.id, job.attempt, since, _EVENTS_WAIT_S, _EVENTS_GATHER_S
                )
                if events is None:
                    raise RunLost(f"its run is no longer on node {node.name}")
                task, since = None, since + len(events)
                for event in events:
                    if (result := await self._take(ctx, node, host, event)) is not None:
                        return result
        except RayTaskError as exc:  # our actor's code failed, not the node
            raise RuntimeError(f"the job's run failed on node {node.name}: {exc}") from None
        except RayError as exc:
            self._hosts.forget(host)  # its actor died (killed after a cancel, or crashed)
            if ctx.should_cancel():
                raise JobCancelled() from None
            # Its actor died, maybe with its node (the head notices a killed raylet only after
            # missed health checks): ask the node before the job can be admitted there again.
            if isinstance(exc, _NODE_GONE) or not await _answers(node):
                self._cluster.lose(node.name)
            raise RunLost(f"its run on node {node.name} was lost: {type(exc).__name__}") from None

    async def _take(
        self, ctx: RunContext, node: ClusterNode, host: Host, event: Event
    ) -> JobResult | None:
        """Act on one event of a run; its result once it succeeded; raise how it failed."""
        if isinstance(event, Progressed):
            ctx.report_progress(event.progress)
        elif isinstance(event, Logged):
            log.log(event.level, "[%s] %s", node.name, event.message)
        elif isinstance(event, ModelsHeld):
            self.node_models[node.name] = event.sha256s
        elif isinstance(event, FilesBack) and event.files:  # none: no thread hop either
            await anyio.to_thread.run_sync(_write_folder, ctx.workdir, event.files)
        elif isinstance(event, Finished):
            return event.result
        elif isinstance(event, Failed):
            if event.error.code == ErrorCode.CUDA_FATAL:
                await self._hosts.retire(host)  # its CUDA context is unusable
            raise NodeJobFailed(_on_node(event.error, node), event.tampered_variant)
        elif isinstance(event, Stopped):
            if ctx.should_cancel():
                raise JobCancelled()
            # asked to stop by a server that went away without recording it
            raise RunLost(f"its run on node {node.name} was stopped by an earlier server")
        return None

    async def _stop(self, ctx: RunContext, host: Host) -> None:
        """Asked to stop (a cancel, a time limit, the watchdog): first the runner, at its next
        safe point, then, after the grace period, the actor that holds the run is killed."""
        with contextlib.suppress(RayError):  # an actor already gone: the run ends with it
            await host.actor.cancel.remote(ctx.job.id, ctx.job.attempt)
        await asyncio.sleep(self._grace_s)
        log.warning("job %s did not stop within %gs; killing its actor", ctx.job.id, self._grace_s)
        await self._hosts.retire(host)


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
