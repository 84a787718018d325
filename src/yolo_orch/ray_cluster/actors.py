"""Where runs live on a node: detached Ray actors that keep each run's events until the server has
committed its outcome, so a server that comes back, even after a SIGKILL, can follow a run that
went on without it from any event on.

- A lane actor (`lane:<lane id>`) per lane, made on the lane's first inference job and kept
  while its node is there: it keeps its lane's runtime, and so the runner's warm models,
  between the jobs it runs.
- A job actor (`host:<random id>`) for a job of any other kind, one job at a time. Each is made
  ahead: a node keeps `hosts.JOB_ACTORS_AHEAD` started and makes another when one is taken,
  since a new actor's process took 0.6-1 s to answer its first call on a small node (even an
  empty actor), longer than a short job. Once its job's outcome is committed it is kept for the
  next job on the same lanes (`hosts.JOB_ACTORS_KEPT` per node), or killed. A server that comes
  back finds which runs each holds by asking it (`runs`).

Both are `RunHost`s, pinned to their node, and neither takes a CPU or a GPU in Ray's
accounting: the server's dispatcher admits every job (at most `slots_per_lane` on a lane, and a
job's `gpus` lanes all on one node), and a job actor made ahead cannot know how many GPUs its job
will take. Which GPUs an actor sees is set by the actor itself, `CUDA_VISIBLE_DEVICES` from its
lanes (`visible_devices`), before anything in its process starts CUDA: a lane actor's when it
starts, a job actor's when its first run starts (which fixes them: it takes later jobs on those
lanes only). Ray 2.60 leaves that variable alone for an actor with no GPUs, so both then see
exactly their lanes' devices as `cuda:0..k-1`. (Not through a runtime env: that would start a
fresh worker process for each actor rather than take an idle one.)
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from dataclasses import dataclass, field

import ray

from yolo_orch.ray_cluster.node_side import (
    Event,
    Failed,
    Finished,
    NodeTask,
    RuntimeKey,
    RuntimeOnNode,
    Stopped,
    runtime_key,
    runtime_of,
    serve_task,
)
from yolo_orch.runners.failures import failure_of

LANE_PREFIX = "lane:"
JOB_HOST_PREFIX = "host:"
_ENDINGS = (Finished, Failed, Stopped)


def lane_actor_name(lane: str) -> str:
    return f"{LANE_PREFIX}{lane}"


def job_actor_name() -> str:
    """A new job actor's: it is made before the job it will run is known."""
    return f"{JOB_HOST_PREFIX}{uuid.uuid4().hex}"


def visible_devices(lanes: tuple[str, ...]) -> str | None:
    """The `CUDA_VISIBLE_DEVICES` that shows an actor its lanes' GPUs only: `<node>/cuda:<i>`
    is CUDA device `i` of the node, as Ray numbers a node's GPUs; None for a CPU lane."""
    indices = [lane.rpartition("/cuda:")[2] for lane in lanes if "/cuda:" in lane]
    return ",".join(indices) if indices else None


@dataclass
class _Run:
    attempt: int
    cancel: threading.Event = field(default_factory=threading.Event)
    events: list[Event] = field(default_factory=list)
    ended: bool = False

    @property
    def over(self) -> bool:
        """Its ending is among its events (the node may still be clearing its folder), or it
        ended without one."""
        return self.ended or (bool(self.events) and isinstance(self.events[-1], _ENDINGS))


class RunHost:
    """The runs of one actor, each `serve_task` in a thread of its own, their events kept in
    order until `release`. Plain Python: `RunHostActor` is this class as a Ray actor."""

    def __init__(
        self, node_id: str, cuda_devices: str | None = None, *, one_job: bool = False
    ) -> None:
        """`cuda_devices`: this process's `CUDA_VISIBLE_DEVICES`, set before anything starts
        CUDA here (an actor has a process of its own). `one_job`: a job actor, whose devices
        are its first job's lanes, set when that run starts."""
        if cuda_devices is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = cuda_devices
        self._devices_from_job = one_job
        self._job_lanes: tuple[str, ...] | None = None
        """A job actor's lanes, once its first run set its devices."""
        self._node_id = node_id
        self._runs: dict[str, _Run] = {}
        self._stop_on_arrival: set[tuple[str, int]] = set()
        """Runs (job id, attempt) asked to stop before they were here: this actor runs its
        calls in threads, so a job's cancel may run before the call that brings its task (Ray
        keeps no order between them), and the run then starts cancelled."""
        self._changed = threading.Condition()
        self._runtimes: dict[RuntimeKey, RuntimeOnNode] = {}
        self._runtimes_lock = threading.Lock()

    def events(
        self,
        task: NodeTask | None,
        job_id: str,
        attempt: int,
        since: int,
        wait_s: float,
        gather_s: float = 0.0,
    ) -> list[Event] | None:
        """The events of the job's run from index `since` on (the server's long poll, which
        a restarted server starts again from 0): once there is one, and the run's ending is
        in or `gather_s` more went by (so a short run answers once, and a long one's progress
        comes in batches); none after `wait_s`. With a `task`, the run starts first unless this
        attempt of it is here already; without one, None when it is not here."""
        run = self._start(task) if task is not None else self._runs.get(job_id)
        if run is None or run.attempt != attempt:
            return None
        with self._changed:
            if self._changed.wait_for(lambda: len(run.events) > since or run.over, wait_s):
                self._changed.wait_for(lambda: run.over, gather_s)
            return run.events[since:]

    def holds(self, job_id: str, attempt: int) -> bool:
        with self._changed:
            run = self._runs.get(job_id)
            return run is not None and run.attempt == attempt

    def held(self) -> int:
        """Runs kept here (running, or ended and not released yet)."""
        with self._changed:
            return len(self._runs)

    def runs(self) -> list[tuple[str, int]]:
        """The job id and attempt of each run kept here."""
        with self._changed:
            return [(job_id, run.attempt) for job_id, run in self._runs.items()]

    def cancel(self, job_id: str, attempt: int) -> None:
        """Ask the runner of that attempt of the job to stop at its next safe point (a cancel
        that comes after its run was released, late, stops no later attempt)."""
        with self._changed:
            run = self._runs.get(job_id)
            if run is None or run.attempt < attempt:
                self._stop_on_arrival.add((job_id, attempt))
        if run is not None and run.attempt == attempt:
            run.cancel.set()

    def release(self, job_id: str) -> None:
        """The job's outcome is committed: forget its run (stopping it, were it still going)."""
        with self._changed:
            run = self._runs.pop(job_id, None)
            self._stop_on_arrival = {stop for stop in self._stop_on_arrival if stop[0] != job_id}
        if run is not None:
            run.cancel.set()

    def keep_only(self, job_ids: list[str]) -> None:
        """After a server restart: release every run but those it re-attached."""
        with self._changed:
            others = [job_id for job_id in self._runs if job_id not in job_ids]
        for job_id in others:
            self.release(job_id)

    def _start(self, task: NodeTask) -> _Run:
        job = task.job
        with self._changed:
            run = self._runs.get(job.id)
            if run is not None and run.attempt == job.attempt:
                return run  # asked again (a server re-attaching): it does not start again
            if run is not None:  # an earlier attempt's run, left behind
                run.cancel.set()
            if self._devices_from_job and self._job_lanes is None:
                self._job_lanes = task.lanes
                if (devices := visible_devices(task.lanes)) is not None:
                    os.environ["CUDA_VISIBLE_DEVICES"] = devices
            elif self._devices_from_job and task.lanes != self._job_lanes:
                raise ValueError(f"this actor sees lanes {self._job_lanes}, not {task.lanes}")
            run = self._runs[job.id] = _Run(job.attempt)
            if (job.id, job.attempt) in self._stop_on_arrival:
                self._stop_on_arrival.discard((job.id, job.attempt))
                run.cancel.set()
        worker = threading.Thread(
            target=self._serve, args=(task, run), name=f"job {job.id}", daemon=True
        )
        worker.start()
        return run

    def _serve(self, task: NodeTask, run: _Run) -> None:
        try:
            with contextlib.closing(
                serve_task(task, self._node_id, cancel=run.cancel, runtime_for=self._runtime)
            ) as events:
                for event in events:
                    self._add(run, event)
                    if isinstance(event, _ENDINGS):
                        # Stop here: after a fatal CUDA error, `serve_task` would end this
                        # process, before the server had the ending; the server kills this
                        # actor itself once it has it.
                        break
        except Exception as exc:  # a fault of ours around the runner: the run fails with it
            self._add(run, Failed(failure_of(exc)))
        finally:
            with self._changed:
                run.ended = True
                self._changed.notify_all()

    def _add(self, run: _Run, event: Event) -> None:
        with self._changed:
            run.events.append(event)
            self._changed.notify_all()

    def _runtime(self, task: NodeTask) -> RuntimeOnNode:
        with self._runtimes_lock:
            key = runtime_key(task)
            if key not in self._runtimes:
                self._runtimes[key] = runtime_of(task, self._node_id)
            return self._runtimes[key]


RunHostActor = ray.remote(num_cpus=0, num_gpus=0, max_restarts=0, max_task_retries=0)(RunHost)


@ray.remote(num_cpus=0, max_retries=0)
def ping() -> bool:
    """Whether a node still runs tasks (after one of its workers died)."""
    return True
