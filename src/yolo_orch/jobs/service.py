"""What the API can do with jobs: the rules of submission and cancel, over the store and the
dispatcher. Knows nothing of HTTP."""

from __future__ import annotations

import logging
import math
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import anyio
import anyio.to_thread

from yolo_orch.dispatch.dispatcher import Dispatcher
from yolo_orch.dispatch.queue_wait import expected_wait_s
from yolo_orch.domain import (
    SIM_MODEL,
    Job,
    JobFilter,
    JobKind,
    JobState,
    JsonObject,
    Model,
    NewJob,
    Page,
)
from yolo_orch.domain.variants import ExportFormat, available_formats, export_refusal
from yolo_orch.errors import (
    ArtifactNotFound,
    FramesNotFound,
    InvalidJob,
    ModelNameTaken,
    ModelNotFound,
    ModelUnusable,
    NoResult,
    QueueFull,
    ResultNotReady,
    ShuttingDown,
    too_many_gpus,
)
from yolo_orch.files.class_names import ClassNameLimits
from yolo_orch.files.inputs import InputLimits, resolve_inputs
from yolo_orch.files.jobfiles import JobFiles
from yolo_orch.files.paths import is_glob
from yolo_orch.files.resultfile import EntryPage, page_of
from yolo_orch.files.task_data import check_task_dataset
from yolo_orch.files.videos import is_video, refuse_unreadable_videos
from yolo_orch.jobs.notifications import JobEvents
from yolo_orch.ops.clock import utcnow
from yolo_orch.ops.logs import before_start
from yolo_orch.ops.stop_signal import StopSignal
from yolo_orch.params.inference import check_task
from yolo_orch.registry.models import ModelRegistry
from yolo_orch.runners.base import Runtime
from yolo_orch.store.base import JobStore

log = logging.getLogger(__name__)

_RECENT_RUNS = 20
"""Finished runs of each kind that say how long one takes."""
_MAX_RETRY_AFTER_S = 3600
_PROVIDED_NAMES = 256
"""Model names whose answer from the runtime `JobService` keeps."""


class JobService:
    def __init__(
        self,
        store: JobStore,
        dispatcher: Dispatcher,
        runtime: Runtime,
        models: ModelRegistry,
        files: JobFiles,
        *,
        max_gpus: Callable[[], int],
        settle_logs: Callable[[], None],
        lane_ids: Sequence[str] = (),
        total_slots: int,
        max_queued: int,
        data_roots: Sequence[Path],
        class_name_limits: ClassNameLimits,
        input_limits: InputLimits,
        max_image_pixels: int,
        file_limiter: anyio.CapacityLimiter,
        walk_limiter: anyio.CapacityLimiter,
        events: JobEvents,
        no_exports: bool = False,
        on_cluster: bool = False,
    ) -> None:
        """`file_limiter` bounds the threads doing request-time file work (resolving inputs,
        checking datasets, reading results): apart from the job runners' threads and from
        anyio's default pool, so neither can starve the other. `walk_limiter` bounds those
        expanding globs, the one kind of file work a client can make costly: a flood of walks
        waits for its own threads while other requests go on. `settle_logs` blocks until the
        lines logged so far are in the job log files. `no_exports`: the lanes build no exports
        (Ray nodes, which never write the registry). `on_cluster`: the lanes are a Ray
        cluster's, `max_gpus` its largest node's (else this host's)."""
        self._max_image_pixels = max_image_pixels
        self._store = store
        self._dispatcher = dispatcher
        self._runtime = runtime
        self._models = models
        self._files = files
        self._max_gpus = max_gpus
        self._settle_logs = settle_logs
        self._lane_ids = tuple(lane_ids)
        self._total_slots = total_slots
        self._max_queued = max_queued
        self._data_roots = list(data_roots)
        self._class_name_limits = class_name_limits
        self._input_limits = input_limits
        self._file_limiter = file_limiter
        self._walk_limiter = walk_limiter
        self._events = events
        self._no_exports = no_exports
        self._on_cluster = on_cluster
        self._provided_models: OrderedDict[tuple[str, JobKind], tuple[bool, str | None]] = (
            OrderedDict()
        )
        self.draining = False
        """New submissions are refused (`ShuttingDown`): the server has begun to drain."""
        self.stopped = StopSignal()
        """The drain has ended: held waits answer now, event streams end."""

    async def drain(self, grace_s: float) -> None:
        """Refuse new submissions, give running jobs `grace_s` to finish (those still running
        then are left for the next start), then answer every held `Prefer: wait` with the job
        as it is and end every event stream: the server is stopping. Polls answer meanwhile."""
        self.draining = True
        try:
            await self._dispatcher.drain(grace_s)
        finally:
            self.stopped.set()

    async def submit(self, new: NewJob) -> tuple[Job, bool]:
        """Store a queued job (committed before this returns) and wake the dispatcher.

        Returns the job and whether it is new (`False`: an earlier request with the same
        idempotency key made it).
        """
        if self.draining:
            raise ShuttingDown()
        if new.gpus > (most := self._max_gpus()):
            raise too_many_gpus(new.gpus, most, on_cluster=self._on_cluster)
        new = await self._with_model_and_files(new)
        if self.draining:  # the checks above take a while: a drain may have begun meanwhile
            raise ShuttingDown()
        try:
            job, created = await self._store.create(new, max_queued=self._max_queued, now=utcnow())
        except QueueFull:
            raise QueueFull(self._max_queued, await self._retry_after_s()) from None
        self._files.settled(new.id)  # its uploads, if any, belong to a stored job now
        if created:
            queued = before_start(job.id)
            log.info("job %s queued (%s, model %s)", job.id, job.kind, job.model, extra=queued)
            self._dispatcher.queued(job)
        return job, created

    async def _with_model_and_files(self, new: NewJob) -> NewJob:
        """Refuse at once what could only fail later: a model this host does not have, inputs
        or a dataset that are not readable files under the data roots."""
        provided, task = await self._provided(new.model, new.kind)
        if provided:
            model_id = None  # `sim`, or a shipped architecture to train from scratch
        else:
            model = await self._models.get(new.model)
            if not model.usable:
                raise ModelUnusable(new.model)
            if new.kind is JobKind.INFERENCE:
                check_task(new.spec["params"], model.task)
                await self._check_format(model, new.spec["params"])
            model_id, task = model.id, model.task
        spec = dict(new.spec)
        if new.kind is JobKind.EXPORT:
            params = spec["params"]
            self._check_buildable(ExportFormat(params["format"]), half=params["half"])
            if "dataset" in spec:  # int8 calibration images, of the model's task
                spec["dataset_path"] = str(await self._checked_dataset(spec, task))
        elif (
            model_id is None and new.model == SIM_MODEL and "files" not in spec
        ):  # uploads keep theirs
            spec["files"] = [{"path": name, "name": name} for name in spec.get("inputs", [])]
        elif new.kind is JobKind.INFERENCE and "files" not in spec:
            inputs: list[str] = spec["inputs"]
            walks = any(is_glob(pattern) for pattern in inputs)
            spec["files"] = await anyio.to_thread.run_sync(
                self._resolved_files,
                inputs,
                limiter=self._walk_limiter if walks else self._file_limiter,
            )
        elif new.kind in (JobKind.TRAINING, JobKind.VALIDATION):
            spec["dataset_path"] = str(await self._checked_dataset(spec, task))
            if new.kind is JobKind.TRAINING:
                await self._check_output_name(spec["params"].get("output_name"))
                for export_format in spec["params"].get("export", []):
                    self._check_buildable(ExportFormat(export_format), half=False)
        if (
            new.kind is JobKind.INFERENCE
            and model_id is not None
            and any(is_video(Path(file["path"])) for file in spec["files"])
        ):  # named by their suffix: a job of images only needs no thread hop for this
            await anyio.to_thread.run_sync(
                refuse_unreadable_videos,
                spec["files"],
                self._max_image_pixels,
                limiter=self._file_limiter,
            )
        return replace(new, spec=spec, model_id=model_id)

    async def _provided(self, model: str, kind: JobKind) -> tuple[bool, str | None]:
        """Whether the runtime has `model` itself for jobs of `kind`, and the model's task then.
        The runtime's answer for a name never changes: it is kept, so a stream of submissions
        naming one model costs one thread hop, not one each."""
        key = (model, kind)
        known = self._provided_models.get(key)
        if known is None:
            known = await anyio.to_thread.run_sync(
                self._ask_runtime, model, kind, limiter=self._file_limiter
            )
            self._provided_models[key] = known
            if len(self._provided_models) > _PROVIDED_NAMES:
                self._provided_models.popitem(last=False)
        self._provided_models.move_to_end(key)
        return known

    def _ask_runtime(self, model: str, kind: JobKind) -> tuple[bool, str | None]:
        if not self._runtime.provides(model, kind):
            return False, None
        return True, self._runtime.model_task(model)

    async def _check_format(self, model: Model, params: JsonObject) -> None:
        """An inference job that names a format the model has no usable variant of, for the
        job's imgsz and half, is refused now (`auto` falls back to the .pt, which always runs)."""
        wanted = params.get("format", "auto")
        if wanted in ("auto", "pt"):
            return
        imgsz, half, cuda = params["imgsz"], params["half"], self._has_cuda_lanes
        variants = await self._models.variants.list_for(model.id)
        available = available_formats(variants, imgsz=imgsz, half=half, cuda=cuda)
        if wanted not in available:
            precision = "half" if half else "full precision"
            raise InvalidJob(
                f"model {model.name!r} has no usable {wanted} variant for imgsz {imgsz} "
                f"({precision}); formats it can run: {', '.join(available)}",
                code="format_not_available",
            )

    @property
    def _has_cuda_lanes(self) -> bool:
        # a Ray lane is `<node>/cuda:<i>`
        return any(lane.rpartition("/")[2].startswith("cuda:") for lane in self._lane_ids)

    def _check_buildable(self, export_format: ExportFormat, *, half: bool) -> None:
        """An export this host cannot build is refused now, not failed on a lane later."""
        if self._no_exports:
            raise InvalidJob(
                "exports do not run on Ray lanes: export on a server with the thread executor, "
                "or import the exported files as a variant (POST /v1/models/{ref}/variants)",
                code="export_unsupported",
            )
        if reason := export_refusal(export_format, half=half, lanes=self._lane_ids):
            raise InvalidJob(reason, code="export_unsupported")

    def _resolved_files(self, inputs: list[str]) -> list[JsonObject]:
        paths = resolve_inputs(inputs, self._data_roots, self._input_limits)
        return [
            {"path": str(path), "name": _display_name(path, self._data_roots)} for path in paths
        ]

    async def _checked_dataset(self, spec: JsonObject, task: str | None) -> Path:
        """A dataset under the data roots that fits the model's task (`task_mismatch`), with
        the split a validation scores."""
        if task is None:  # shipped architectures and registry models always have one
            raise InvalidJob("the model has no task", code="task_mismatch")
        path, dataset = await anyio.to_thread.run_sync(
            check_task_dataset,
            task,
            spec["dataset"],
            self._data_roots,
            self._class_name_limits,
            limiter=self._file_limiter,
        )
        split = spec.get("split")
        if split is not None and split not in dataset.splits:
            raise InvalidJob(f"{spec['dataset']!r} has no {split!r} split", "invalid_dataset")
        return path

    async def _check_output_name(self, name: str | None) -> None:
        """A training job that would end by failing to register its model is refused now."""
        if name is None:
            return
        try:
            await self._models.get(name)
        except ModelNotFound:
            return
        raise ModelNameTaken(name)

    async def get(self, job_id: str) -> Job:
        return await self._store.get(job_id)

    async def wait_until_finished(self, job_id: str, timeout_s: float) -> Job:
        """The job once it is terminal, or as it is after `timeout_s` or once the server stops
        (`stopped`). Woken by the job's own change events: no thread and no polling while it
        waits."""
        deadline = time.monotonic() + timeout_s
        # The version first: a change between the two reads is then seen, not missed.
        version = self._events.version(job_id)
        job = await self._store.get(job_id)
        while True:
            left = deadline - time.monotonic()
            if job.state.is_terminal or left <= 0:
                return job
            with anyio.CancelScope() as waiting, self.stopped.interrupting(waiting):
                change = await self._events.next_change(job_id, version, left)
            if waiting.cancel_called:  # the server stops: the job as it is now
                return await self._store.get(job_id)
            version = self._events.version(job_id)
            latest = change if change is not None and change.version == version else None
            if latest is not None and latest.job is not None:
                job = latest.job  # no read: the change came with the job
            elif latest is None or not latest.progress_only:  # timed out, or changed again
                job = await self._store.get(job_id)

    async def list_jobs(self, where: JobFilter, *, limit: int, before_seq: int | None) -> Page:
        return await self._store.list_jobs(where, limit=limit, before_seq=before_seq)

    async def cancel(self, job_id: str) -> Job:
        job = await self._store.cancel(job_id, utcnow())
        log.info("job %s: cancel requested (%s)", job.id, job.state, extra=_ids(job))
        if job.state is JobState.RUNNING:
            self._dispatcher.request_cancel(job_id)
        else:
            self._dispatcher.wake()
        return job

    async def result(self, job_id: str) -> bytes | Path:
        """A succeeded job's full result (JSON): kept with the job (small), or the file to
        stream."""
        await self._succeeded(job_id)
        kept = await self._store.kept_result(job_id)
        return kept if kept is not None else self._files.result_path(job_id)

    async def result_page(self, job_id: str, offset: int, limit: int) -> EntryPage:
        """A page of a succeeded job's per-image entries."""
        await self._succeeded(job_id)
        kept = await self._store.kept_result(job_id)
        if kept is not None:
            return page_of(kept, offset, limit)
        return await anyio.to_thread.run_sync(
            self._files.result_page, job_id, offset, limit, limiter=self._file_limiter
        )

    async def frame_page(self, job_id: str, entry: int, offset: int, limit: int) -> EntryPage:
        """A page of the frames of the video at `entry` of a succeeded job's result."""
        await self._succeeded(job_id)
        page = await anyio.to_thread.run_sync(
            self._files.frame_page, job_id, entry, offset, limit, limiter=self._file_limiter
        )
        if page is None:
            raise FramesNotFound(job_id, entry)
        return page

    async def _succeeded(self, job_id: str) -> None:
        job = await self._store.get(job_id)
        if job.state is not JobState.SUCCEEDED:  # waiting helps only a job that may succeed
            raise (NoResult if job.state.is_terminal else ResultNotReady)(job_id, job.state)

    async def training_metrics(self, job_id: str) -> bytes:
        await self._store.get(job_id)
        return await anyio.to_thread.run_sync(
            self._files.read_metrics, job_id, limiter=self._file_limiter
        )

    async def log_text(self, job_id: str) -> bytes:
        await self._store.get(job_id)
        return await anyio.to_thread.run_sync(self._read_log, job_id, limiter=self._file_limiter)

    def _read_log(self, job_id: str) -> bytes:
        self._settle_logs()  # lines logged before the request are in the file
        return self._files.read_log(job_id)

    async def artifacts(self, job_id: str) -> list[tuple[str, int]]:
        await self._store.get(job_id)  # unknown job: 404, not an empty list
        return await anyio.to_thread.run_sync(
            self._files.artifacts, job_id, limiter=self._file_limiter
        )

    async def artifact(self, job_id: str, name: str) -> Path:
        await self._store.get(job_id)
        path = await anyio.to_thread.run_sync(
            self._files.artifact_path, job_id, name, limiter=self._file_limiter
        )
        if path is None:
            raise ArtifactNotFound(job_id, name)
        return path

    async def _retry_after_s(self) -> int:
        """The expected wait of the work ahead: when a job submitted now could start."""
        running = await self._store.list_jobs(
            JobFilter(states=(JobState.RUNNING,)), limit=self._total_slots, before_seq=None
        )
        queued = {kind: await self._store.count_queued(kind) for kind in JobKind}
        recent = {kind: await self._store.recent_durations(_RECENT_RUNS, kind) for kind in JobKind}
        wait = expected_wait_s(running.jobs, queued, recent, slots=self._total_slots, now=utcnow())
        return max(1, min(_MAX_RETRY_AFTER_S, math.ceil(wait)))


def _ids(job: Job) -> dict[str, str]:
    return {"job_id": job.id}


def _display_name(path: Path, roots: Sequence[Path]) -> str:
    """The file as the client named it: relative to its data root, never a server path."""
    for root in roots:
        real_root = Path(os.path.realpath(root))
        if path.is_relative_to(real_root):
            return str(path.relative_to(real_root))
    return path.name
