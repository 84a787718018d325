"""What the API can do with jobs: the rules of submission and cancel, over the store and the
dispatcher. Knows nothing of HTTP."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from statistics import fmean

import anyio.to_thread

from yolo_orch.clock import utcnow
from yolo_orch.datasets import check_dataset
from yolo_orch.dispatcher import Dispatcher
from yolo_orch.domain import SIM_MODEL, Job, JobFilter, JobKind, JobState, NewJob, Page
from yolo_orch.errors import (
    ArtifactNotFound,
    InvalidJob,
    ModelNameTaken,
    ModelNotFound,
    ModelUnusable,
    QueueFull,
    ResultNotReady,
    ShuttingDown,
)
from yolo_orch.inputs import resolve_inputs
from yolo_orch.jobfiles import JobFiles
from yolo_orch.models import ModelRegistry
from yolo_orch.runners.base import Runtime
from yolo_orch.store.base import JobStore
from yolo_orch.variants import ExportFormat, export_refusal

log = logging.getLogger(__name__)


class JobService:
    def __init__(
        self,
        store: JobStore,
        dispatcher: Dispatcher,
        runtime: Runtime,
        models: ModelRegistry,
        files: JobFiles,
        *,
        lane_count: int,
        lane_ids: Sequence[str] = (),
        total_slots: int,
        max_queued: int,
        data_roots: Sequence[Path],
        max_files_per_job: int,
    ) -> None:
        self._store = store
        self._dispatcher = dispatcher
        self._runtime = runtime
        self._models = models
        self._files = files
        self._lane_count = lane_count
        self._lane_ids = tuple(lane_ids)
        self._total_slots = total_slots
        self._max_queued = max_queued
        self._data_roots = list(data_roots)
        self._max_files = max_files_per_job
        self.draining = False

    async def submit(self, new: NewJob) -> tuple[Job, bool]:
        """Store a queued job (committed before this returns) and wake the dispatcher.

        Returns the job and whether it is new (`False`: an earlier request with the same
        idempotency key made it).
        """
        if self.draining:
            raise ShuttingDown()
        if new.gpus > self._lane_count:
            raise InvalidJob(
                f"the job asks for {new.gpus} GPUs; this host has {self._lane_count} lane(s)",
                code="too_many_gpus",
            )
        new = await self._with_model_and_files(new)
        if self.draining:  # the checks above take a while: a drain may have begun meanwhile
            raise ShuttingDown()
        try:
            job, created = await self._store.create(new, max_queued=self._max_queued, now=utcnow())
        except QueueFull:
            raise QueueFull(self._max_queued, await self._retry_after_s()) from None
        if created:
            log.info("job %s queued (%s, model %s)", job.id, job.kind, job.model, extra=_ids(job))
            self._dispatcher.wake()
        return job, created

    async def _with_model_and_files(self, new: NewJob) -> NewJob:
        """Refuse at once what could only fail later: a model this host does not have, inputs
        or a dataset that are not readable files under the data roots."""
        if await anyio.to_thread.run_sync(self._runtime.provides, new.model, new.kind):
            model_id = None  # `sim`, or a shipped architecture to train from scratch
        else:
            model = await self._models.get(new.model)
            if not model.usable:
                raise ModelUnusable(new.model)
            model_id = model.id
        spec = dict(new.spec)
        if new.kind is JobKind.EXPORT:
            params = spec["params"]
            self._check_buildable(ExportFormat(params["format"]), half=params["half"])
            if "dataset" in spec:
                dataset = await anyio.to_thread.run_sync(
                    check_dataset, spec["dataset"], self._data_roots
                )
                spec["dataset_path"] = str(dataset)
        elif model_id is None and new.model == SIM_MODEL:
            spec["files"] = [{"path": name, "name": name} for name in spec.get("inputs", [])]
        elif new.kind is JobKind.INFERENCE and "files" not in spec:
            paths = await anyio.to_thread.run_sync(
                resolve_inputs, spec["inputs"], self._data_roots, self._max_files
            )
            spec["files"] = [
                {"path": str(path), "name": _display_name(path, self._data_roots)} for path in paths
            ]
        elif new.kind is JobKind.TRAINING:
            dataset = await anyio.to_thread.run_sync(
                check_dataset, spec["dataset"], self._data_roots
            )
            spec["dataset_path"] = str(dataset)
            await self._check_output_name(spec["params"].get("output_name"))
            for export_format in spec["params"].get("export", []):
                self._check_buildable(ExportFormat(export_format), half=False)
        return replace(new, spec=spec, model_id=model_id)

    def _check_buildable(self, export_format: ExportFormat, *, half: bool) -> None:
        """An export this host cannot build is refused now, not failed on a lane later."""
        if reason := export_refusal(export_format, half=half, lanes=self._lane_ids):
            raise InvalidJob(reason, code="export_unsupported")

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

    async def result(self, job_id: str) -> bytes:
        job = await self._store.get(job_id)
        if job.state is not JobState.SUCCEEDED:
            raise ResultNotReady(job_id, job.state)
        return await anyio.to_thread.run_sync(self._files.read_result, job_id)

    async def training_metrics(self, job_id: str) -> bytes:
        await self._store.get(job_id)
        return await anyio.to_thread.run_sync(self._files.read_metrics, job_id)

    async def log_text(self, job_id: str) -> bytes:
        await self._store.get(job_id)
        return await anyio.to_thread.run_sync(self._files.read_log, job_id)

    async def artifacts(self, job_id: str) -> list[tuple[str, int]]:
        await self._store.get(job_id)  # unknown job: 404, not an empty list
        return await anyio.to_thread.run_sync(self._files.artifacts, job_id)

    async def artifact(self, job_id: str, name: str) -> Path:
        await self._store.get(job_id)
        path = await anyio.to_thread.run_sync(self._files.artifact_path, job_id, name)
        if path is None:
            raise ArtifactNotFound(job_id, name)
        return path

    async def _retry_after_s(self) -> int:
        """A queue place opens each time a job starts: about one mean run time per slot."""
        durations = await self._store.recent_durations(20)
        mean = fmean(durations) if durations else 1.0
        return max(1, min(3600, math.ceil(mean / self._total_slots)))


def _ids(job: Job) -> dict[str, str]:
    return {"job_id": job.id}


def _display_name(path: Path, roots: Sequence[Path]) -> str:
    """The file as the client named it: relative to its data root, never a server path."""
    for root in roots:
        real_root = Path(os.path.realpath(root))
        if path.is_relative_to(real_root):
            return str(path.relative_to(real_root))
    return path.name
