"""The server's side of the run-holding actors (`actors.py`): finds or makes the actor a job runs
in (a job actor kept from an earlier job on the same lanes, or one of the node's job actors
started ahead of its jobs), re-finds them after a restart, and lets them go."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import anyio
import anyio.to_thread
import ray
from ray.exceptions import RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from yolo_orch.domain import Job, JobKind
from yolo_orch.kinds import KINDS
from yolo_orch.ray_cluster.actors import (
    JOB_HOST_PREFIX,
    LANE_PREFIX,
    RunHostActor,
    job_actor_name,
    lane_actor_name,
    visible_devices,
)
from yolo_orch.ray_cluster.nodes import ClusterNode, ClusterWatcher

log = logging.getLogger(__name__)

JOB_ACTORS_AHEAD = 2
"""Job actors each node keeps started ahead of its next jobs: a process takes Ray longer to
start (about a second on a busy 2-core host) than a short training lasts, so with one ahead, a
node's second training in a row waited for its process with its GPUs held."""
JOB_ACTORS_KEPT = 2
"""Job actors each node keeps once their job's outcome is in, each for the next job on the same
lanes: a process's GPUs are fixed once its first run starts (`actors.py`), so it can take no job
on other lanes. Each keeps its process (and on a GPU its CUDA context) while it waits, which a
new job on those lanes would otherwise start again, for as long as a short training lasts."""
_CALL_TIMEOUT_S = 10.0
"""How long an actor gets to answer a control call (re-attach, release) before it counts as
gone."""


@dataclass(frozen=True)
class Host:
    actor: Any
    node_id: str
    lane: str | None
    """The lane of a lane actor; None for a job actor (one job at a time)."""
    lanes: tuple[str, ...] = ()
    """A job actor's lanes, fixed by its first job; none before."""


def in_lane_actor(kind: JobKind, lanes: tuple[str, ...]) -> bool:
    """A one-lane job of a kind that says so (inference) runs in its lane's warm actor; every
    other in an actor of its own."""
    return KINDS[kind].warm_lane_actor and len(lanes) == 1


class Hosts:
    def __init__(self, cluster: ClusterWatcher, slots_per_lane: int) -> None:
        self._cluster = cluster
        self._slots = slots_per_lane
        self._lanes: dict[str, Host] = {}
        self._jobs: dict[str, Host] = {}
        """By job id: the host of each run not released yet."""
        self._next: dict[str, list[Host]] = {}
        """By node id: the job actors made for the node's next jobs (they start meanwhile)."""
        self._kept: dict[tuple[str, ...], Host] = {}
        """By lanes: a job actor whose job's outcome is in, for the next job on those lanes
        (oldest first)."""

    async def host_for(self, job: Job, lanes: tuple[str, ...], node: ClusterNode) -> Host:
        """The actor the job's run lives in: its lane actor (made on the lane's first job), or
        the job actor kept from the last job on the same lanes, or else the node's next job
        actor (made now if there is none). A node's next job actor is made with the first actor
        the node gets, and again each time one is taken."""
        self._forget_gone_nodes()
        host = self._jobs.get(job.id)
        if host is not None:
            return host
        if in_lane_actor(job.kind, lanes):
            host = self._lanes.get(lanes[0])
            if host is None:
                host = await anyio.to_thread.run_sync(self._make_lane_actor, lanes[0], node)
                self._lanes[lanes[0]] = host
        elif (kept := self._kept.pop(lanes, None)) is not None:
            host = kept
        else:
            ahead = self._next.get(node.node_id)
            if ahead:
                host = ahead.pop(0)
            else:
                host = await anyio.to_thread.run_sync(self._make_job_actor, node)
            host = replace(host, lanes=lanes)
        ahead = self._next.setdefault(node.node_id, [])
        while len(ahead) < JOB_ACTORS_AHEAD:
            ahead.append(await anyio.to_thread.run_sync(self._make_job_actor, node))
        self._jobs[job.id] = host
        return host

    async def retire(self, host: Host) -> None:
        """Kill an actor (a run that ignored its cancel, a CUDA context a fatal error broke)
        and wait until it is gone, so that the lane's next job gets a fresh one."""
        self.forget(host)
        await anyio.to_thread.run_sync(_kill, host.actor)
        with contextlib.suppress(RayError, TimeoutError), anyio.fail_after(_CALL_TIMEOUT_S):
            while True:  # answers until Ray has it dead
                await host.actor.held.remote()
                await anyio.sleep(0.05)

    def forget(self, host: Host) -> None:
        """An actor that died under its run: the lane's next job makes a new one."""
        if host.lane is not None and self._lanes.get(host.lane) == host:
            del self._lanes[host.lane]

    async def release(self, job_id: str) -> None:
        """The job's outcome is committed: its run is let go, and its job actor kept for the
        next job on its lanes, unless it does not answer (killed, or dead under its run)."""
        host = self._jobs.pop(job_id, None)
        if host is None:
            return
        released = await _release(host, job_id)
        if host.lane is not None:
            return
        for gone in self._keep(host) if released else [host]:
            await anyio.to_thread.run_sync(_kill, gone.actor)

    def _keep(self, host: Host) -> list[Host]:
        """Keep a job actor for its lanes' next job: one per lanes, `JOB_ACTORS_KEPT` per node.
        Returns those that go (the oldest, or `host` itself if its node left)."""
        if host.node_id not in self._alive():
            return [host]
        gone = [self._kept.pop(host.lanes)] if host.lanes in self._kept else []
        self._kept[host.lanes] = host
        on_node = [lanes for lanes, kept in self._kept.items() if kept.node_id == host.node_id]
        return gone + [self._kept.pop(lanes) for lanes in on_node[:-JOB_ACTORS_KEPT]]

    async def surviving(self, jobs: Sequence[Job]) -> set[str]:
        """Of the RUNNING jobs a previous server left, those whose run an actor of this
        namespace still holds (same attempt); every other run kept anywhere is let go, and
        every job actor that holds none (the previous server's next ones too) is killed."""
        names = set(await anyio.to_thread.run_sync(ray.util.list_named_actors))
        for name in names:
            lane = name.removeprefix(LANE_PREFIX)
            node = self._cluster.node_of(lane)
            if name.startswith(LANE_PREFIX) and node is not None and lane not in self._lanes:
                actor = await _actor(name)
                if actor is not None:
                    self._lanes[lane] = Host(actor, node.node_id, lane)
        job_actors = {}  # at start, before this server made any
        for name in sorted(n for n in names if n.startswith(JOB_HOST_PREFIX)):
            actor = await _actor(name)
            if actor is not None:
                job_actors[name] = (actor, await _runs(actor))
        survivors = set()
        for job in jobs:
            host = await self._host_of(job, job_actors)
            if host is not None and await _holds(host, job):
                survivors.add(job.id)
                self._jobs[job.id] = host
        for actor, runs in job_actors.values():
            if not any(job_id in survivors for job_id, _ in runs):
                await anyio.to_thread.run_sync(_kill, actor)
        for lane, host in list(self._lanes.items()):
            try:
                with anyio.fail_after(_CALL_TIMEOUT_S):
                    await host.actor.keep_only.remote(sorted(survivors))
            except (RayError, TimeoutError):
                del self._lanes[lane]
        return survivors

    async def close(self) -> None:
        """At a graceful stop: kill the lane actors that hold no run (the warm models go with
        them), and the job actors made ahead or kept; those holding a run a drain left behind
        stay for the next start."""
        idle = [host for ahead in self._next.values() for host in ahead]
        for host in [*idle, *self._kept.values()]:
            await anyio.to_thread.run_sync(_kill, host.actor)
        self._next.clear()
        self._kept.clear()
        for host in list(self._lanes.values()):
            with contextlib.suppress(RayError, TimeoutError):
                with anyio.fail_after(_CALL_TIMEOUT_S):
                    held = await host.actor.held.remote()
                if not held:
                    await anyio.to_thread.run_sync(_kill, host.actor)
        self._lanes.clear()

    async def _host_of(
        self, job: Job, job_actors: dict[str, tuple[Any, list[tuple[str, int]]]]
    ) -> Host | None:
        lanes = job.devices or ()
        node = self._cluster.node_of(lanes[0]) if lanes else None
        if node is None:
            return None
        if in_lane_actor(job.kind, lanes):
            return self._lanes.get(lanes[0])
        for actor, runs in job_actors.values():
            if any(job_id == job.id for job_id, _ in runs):
                return Host(actor, node.node_id, None, lanes)
        return None

    def _make_lane_actor(self, lane: str, node: ClusterNode) -> Host:
        actor = RunHostActor.options(
            name=lane_actor_name(lane),
            get_if_exists=True,
            lifetime="detached",
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
            # a follow per run and a few control calls (and follows a dead server left)
            max_concurrency=2 * self._slots + 4,
        ).remote(node.node_id, visible_devices((lane,)))
        log.info("lane %s: a new lane actor", lane)
        return Host(actor, node.node_id, lane)

    def _make_job_actor(self, node: ClusterNode) -> Host:
        actor = RunHostActor.options(
            name=job_actor_name(),
            lifetime="detached",
            scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False),
            max_concurrency=4,
        ).remote(node.node_id, one_job=True)
        return Host(actor, node.node_id, None)

    def _forget_gone_nodes(self) -> None:
        """A node that left took its actors with it."""
        alive = self._alive()
        for node_id in [node_id for node_id in self._next if node_id not in alive]:
            del self._next[node_id]
        for lanes in [lanes for lanes, host in self._kept.items() if host.node_id not in alive]:
            del self._kept[lanes]
        for lane, host in list(self._lanes.items()):
            if host.node_id not in alive:
                del self._lanes[lane]
                log.info("lane %s: its node left, and its lane actor with it", lane)

    def _alive(self) -> set[str]:
        return {node.node_id for node in self._cluster.nodes.values()}


async def _release(host: Host, job_id: str) -> bool:
    """Whether the actor let the job's run go (False: it did not answer)."""
    try:
        with anyio.fail_after(_CALL_TIMEOUT_S):
            await host.actor.release.remote(job_id)
    except (RayError, TimeoutError):
        return False
    return True


async def _holds(host: Host, job: Job) -> bool:
    try:
        with anyio.fail_after(_CALL_TIMEOUT_S):
            return bool(await host.actor.holds.remote(job.id, job.attempt))
    except (RayError, TimeoutError):
        return False


async def _runs(actor: Any) -> list[tuple[str, int]]:
    """The runs a job actor holds; none when it does not answer (it is killed then)."""
    try:
        with anyio.fail_after(_CALL_TIMEOUT_S):
            return [(str(job_id), int(attempt)) for job_id, attempt in await actor.runs.remote()]
    except (RayError, TimeoutError):
        return []


async def _actor(name: str) -> Any:
    """The named actor of this namespace, or None once it is gone."""
    try:
        return await anyio.to_thread.run_sync(ray.get_actor, name)
    except ValueError:
        return None


def _kill(actor: Any) -> None:
    with contextlib.suppress(RayError, ValueError):
        ray.kill(actor, no_restart=True)
