"""What runs on a node: the job's runner in a thread, whose events (every progress report, log
line, file and the outcome, in order) go back to the server through the actor that holds the run
(`actors.py`). Nothing here writes the database or the server's job folder."""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import tempfile
import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path

import ray

from yolo_orch.domain import Job, JobError, JobResult, Progress
from yolo_orch.errors import ErrorCode, JobCancelled, VariantTampered
from yolo_orch.files.jobfiles import INPUTS_DIR, JOB_LOG, RESULT_FILE, RESULT_INDEX
from yolo_orch.ray_cluster.node_cache import NodeModelCache, VariantOffer, WeightsOffer
from yolo_orch.ray_cluster.node_runtime import (
    NodeRuntimeSpec,
    ShippedInput,
    check_shared_dataset,
    node_runtime,
    place_inputs,
)
from yolo_orch.ray_cluster.nodes import NODE_NAME_CHARS
from yolo_orch.runners.base import RunContext, Runtime
from yolo_orch.runners.failures import failure_of

_POLL_S = 0.1
_SERVER_FILES = frozenset({JOB_LOG, RESULT_FILE, RESULT_INDEX})
"""Job folder files the server writes itself."""


def travels(name: str) -> bool:
    """Whether a file of the job's folder (its path relative to it) goes between the server
    and the node: not the files the server writes itself, and not the inputs, which travel
    as the task's `inputs` (read under the server's rules) and never come back."""
    return name not in _SERVER_FILES and not name.startswith(f"{INPUTS_DIR}/")


@dataclass(frozen=True)
class NodeTask:
    job: Job
    lanes: tuple[str, ...]
    """The cluster lanes the dispatcher admitted the job onto (`<node>/cuda:0`, ...)."""
    runtime: NodeRuntimeSpec
    seed: dict[str, bytes]
    """The job folder's files as the server has them (checkpoints to resume from, earlier
    attempts' files), relative paths to bytes."""
    inputs: list[ShippedInput] | None
    """An inference job's files in `spec.files` order, read on the server; written into the
    job's folder on the node, where `spec.files` then points. None: nothing to ship (the
    simulated runtime's inputs are only names)."""
    weights: WeightsOffer | None
    variant: VariantOffer | None
    """The exported variant an inference job runs (None: its `.pt`)."""
    cache_dir: str
    cache_models: int


@dataclass(frozen=True)
class Progressed:
    progress: Progress


@dataclass(frozen=True)
class Logged:
    level: int
    message: str


@dataclass(frozen=True)
class ModelsHeld:
    sha256s: list[str]


@dataclass(frozen=True)
class FilesBack:
    files: dict[str, bytes]
    """What the run created or changed in its job folder."""


@dataclass(frozen=True)
class Finished:
    result: JobResult


@dataclass(frozen=True)
class Failed:
    error: JobError
    tampered_variant: str | None = None
    """The id of the variant whose files failed their fingerprints (the server retires it,
    not its model)."""


@dataclass(frozen=True)
class Stopped:
    """The runner stopped because the job was cancelled."""


Event = Progressed | Logged | ModelsHeld | FilesBack | Finished | Failed | Stopped
_Ending = Finished | Failed | Stopped


def serve_task(
    task: NodeTask,
    node_id: str,
    *,
    cancel: threading.Event | None = None,
    runtime_for: Callable[[NodeTask], RuntimeOnNode] | None = None,
) -> Generator[Event]:
    """`cancel`: set to ask the runner to stop at its next safe point (else a `ray.cancel`
    does); `runtime_for`: the caller's runtimes, kept warm between jobs (else one for this job
    only, `runtime_of`)."""
    events: queue.Queue[Event | None] = queue.Queue()
    cancel = cancel or threading.Event()
    with tempfile.TemporaryDirectory(prefix=f"yolo-orch-{task.job.id}-") as folder:
        workdir = Path(folder)
        for name, data in task.seed.items():
            (workdir / name).parent.mkdir(parents=True, exist_ok=True)
            (workdir / name).write_bytes(data)
        ending: list[_Ending] = []
        worker = threading.Thread(
            target=_work,
            args=(
                task,
                node_id[:NODE_NAME_CHARS],
                runtime_for or (lambda task: runtime_of(task, node_id)),
                workdir,
                events,
                cancel,
                ending,
            ),
            name=f"job {task.job.id}",
            daemon=True,
        )
        worker.start()
        while True:
            try:
                event = events.get(timeout=_POLL_S)
            except queue.Empty:
                continue
            except KeyboardInterrupt:  # ray.cancel: the runner stops at its next safe point
                cancel.set()
                continue
            if event is None:
                break
            yield event
        yield FilesBack(_changed_files(workdir, task.seed))
        yield ending[0]
    if isinstance(ending[0], Failed) and ending[0].error.code == ErrorCode.CUDA_FATAL:
        os._exit(1)  # this worker's CUDA context is unusable: Ray starts a fresh one


def _work(
    task: NodeTask,
    node: str,
    runtime_for: Callable[[NodeTask], RuntimeOnNode],
    workdir: Path,
    events: queue.Queue[Event | None],
    cancel: threading.Event,
    ending: list[_Ending],
) -> None:
    handler = _QueueHandler(events, threading.get_ident())
    package_log = logging.getLogger("yolo_orch")
    package_log.addHandler(handler)
    package_log.setLevel(logging.INFO)
    try:
        if cancel.is_set():  # stopped before it started: no runtime, weights or model loaded
            raise JobCancelled()
        on_node = runtime_for(task)
        with contextlib.ExitStack() as held:
            if task.weights is not None:
                on_node.cache.ensure(task.weights)
            if task.variant is not None:
                held.enter_context(on_node.cache.using_variant(task.variant))
            if task.weights is not None or task.variant is not None:
                events.put(ModelsHeld(on_node.cache.held()))
            ending.append(Finished(_run(task, node, on_node, workdir, events, cancel)))
    except JobCancelled:
        ending.append(Stopped())
    except VariantTampered as exc:
        ending.append(Failed(failure_of(exc), exc.variant_id))
    except Exception as exc:
        ending.append(Failed(failure_of(exc)))
    finally:
        package_log.removeHandler(handler)
        events.put(None)


def _run(
    task: NodeTask,
    node: str,
    on_node: RuntimeOnNode,
    workdir: Path,
    events: queue.Queue[Event | None],
    cancel: threading.Event,
) -> JobResult:
    check_shared_dataset(task.job, task.runtime.shared_data_roots, node)
    job = task.job
    if task.inputs is not None:
        job = place_inputs(job, task.inputs, workdir)
    ctx = RunContext(
        job=job,
        devices=_local_devices(task.lanes),
        workdir=workdir,
        report_progress=lambda progress: events.put(Progressed(progress)),
        should_cancel=cancel.is_set,
    )
    return on_node.runtime.runner(job.kind).run(ctx)


def _local_devices(lanes: tuple[str, ...]) -> tuple[str, ...]:
    """The actor's CUDA_VISIBLE_DEVICES names its lanes' GPUs only: they are cuda:0.. here."""
    if all(lane.endswith("/cpu") for lane in lanes):
        return ("cpu",)
    return tuple(f"cuda:{i}" for i in range(len(lanes)))


@dataclass(frozen=True)
class RuntimeOnNode:
    cache: NodeModelCache
    """The node's kept model files; the runtime resolves the job's weights through it, once
    `ensure` verified them for the job."""
    runtime: Runtime


def runtime_of(task: NodeTask, node_id: str) -> RuntimeOnNode:
    """Blocking: a new runtime for the job, on the node's model cache; a lane actor keeps one
    per `runtime_key` for its next jobs."""
    cache = NodeModelCache(Path(task.cache_dir) / node_id, task.cache_models, ray.get)
    config_dir = Path(task.cache_dir) / "ultralytics"
    return RuntimeOnNode(cache, node_runtime(task.runtime, len(task.lanes), cache, config_dir))


RuntimeKey = tuple[NodeRuntimeSpec, int, str, int]


def runtime_key(task: NodeTask) -> RuntimeKey:
    """What a runtime depends on: the server's runtime settings, the job's lane count and the
    node's model cache (its folder and size), so a warm runtime kept under this key keeps the
    files the job's settings say."""
    return task.runtime, len(task.lanes), task.cache_dir, task.cache_models


def _changed_files(workdir: Path, seed: dict[str, bytes]) -> dict[str, bytes]:
    files = {}
    for path in sorted(workdir.rglob("*")):
        if path.is_file():
            name = path.relative_to(workdir).as_posix()
            if not travels(name):
                continue
            data = path.read_bytes()
            if seed.get(name) != data:
                files[name] = data
    return files


class _QueueHandler(logging.Handler):
    """The runner thread's log records, sent to the server to land in the job's log."""

    def __init__(self, events: queue.Queue[Event | None], thread: int) -> None:
        super().__init__(logging.INFO)
        self._events = events
        self._thread = thread

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self._thread:
            self._events.put(Logged(record.levelno, record.getMessage()))
