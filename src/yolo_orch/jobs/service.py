"""What the API can do with jobs: the rules of submission and cancel, over the store and the
dispatcher. Knows nothing of HTTP."""

from __future__ import annotations

import logging
import math
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
    NewJob,
    Page,
)
from yolo_orch.domain.streams import NO_HOSTS, AllowedHosts
from yolo_orch.domain.webhook_hosts import NO_WEBHOOK_HOSTS
from yolo_orch.errors import (
    AliasNotFound,
    ArtifactNotFound,
    FramesNotFound,
    ModelNotFound,
    ModelUnusable,
    NoResult,
    NotAStream,
    QueueFull,
    ResultNotReady,
    ShuttingDown,
    SnapshotNotFound,
    too_many_gpus,
)
from yolo_orch.files.class_names import ClassNameLimits
from yolo_orch.files.inputs import InputLimits
from yolo_orch.files.jobfiles import JobFiles
from yolo_orch.files.managed_datasets import ManagedDatasets
from yolo_orch.files.resultfile import EntryPage, page_of
from yolo_orch.files.stream_segments import SNAPSHOT_FILE, FramePage, read_since
from yolo_orch.jobs.chains import chain_of
from yolo_orch.jobs.notifications import JobEvents
from yolo_orch.jobs.queue_view import QueueView, read_queue
from yolo_orch.kinds import KINDS
from yolo_orch.kinds.submission import Submission, SubmissionChecks
from yolo_orch.ops.clock import utcnow
from yolo_orch.ops.logs import before_start
from yolo_orch.ops.stop_signal import StopSignal
from yolo_orch.params.chains import ThenSteps
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
        stream_hosts: AllowedHosts = NO_HOSTS,
        stream_fps: float = 0.0,
        check_webhook: Callable[[str], None] = NO_WEBHOOK_HOSTS.check,
        datasets: ManagedDatasets | None = None,
    ) -> None:
        """`file_limiter` bounds the threads doing request-time file work (resolving inputs,
        checking datasets, reading results): apart from the job runners' threads and from
        anyio's default pool, so neither can starve the other. `walk_limiter` bounds those
        expanding globs, the one kind of file work a client can make costly: a flood of walks
        waits for its own threads while other requests go on. `settle_logs` blocks until the
        lines logged so far are in the job log files. `no_exports`: the lanes build no exports
        (Ray nodes, which never write the registry). `on_cluster`: the lanes are a Ray
        cluster's, `max_gpus` its largest node's (else this host's). `stream_hosts` and
        `stream_fps`: what stream jobs may open and ask of a lane (`SubmissionChecks`).
        `check_webhook`: refuses a job's webhook URL the server may not call. `datasets`: the
        managed datasets jobs may name (`dataset:<name>`)."""
        self._store = store
        self._dispatcher = dispatcher
        self._runtime = runtime
        self._models = models
        self._files = files
        self._max_gpus = max_gpus
        self._settle_logs = settle_logs
        self._total_slots = total_slots
        self._max_queued = max_queued
        self._file_limiter = file_limiter
        self._events = events
        self._on_cluster = on_cluster
        self._check_webhook = check_webhook
        self._checks = SubmissionChecks(
            models,
            tuple(lane_ids),
            tuple(data_roots),
            class_name_limits,
            input_limits,
            max_image_pixels,
            file_limiter,
            walk_limiter,
            no_exports=no_exports,
            stream_hosts=stream_hosts,
            stream_fps=stream_fps,
            datasets=datasets,
            no_capture=on_cluster,
        )
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

    async def submit(self, new: NewJob, then: ThenSteps | None = None) -> tuple[Job, bool]:
        """Store a queued job (committed before this returns) and wake the dispatcher; with
        `then`, the jobs of its chain's steps too, in the same write (`jobs/chains.py`).

        Returns the job and whether it is new (`False`: an earlier request with the same
        idempotency key, or a job with the same unique key, made it).
        """
        if self.draining:
            raise ShuttingDown()
        if new.gpus > (most := self._max_gpus()):
            raise too_many_gpus(new.gpus, most, on_cluster=self._on_cluster)
        if new.webhook is not None:
            self._check_webhook(new.webhook.url)
        new, task = await self._with_model_and_files(new)
        chain = None if then is None else await self._chain(new, then, task)
        if self.draining:  # the checks above take a while: a drain may have begun meanwhile
            raise ShuttingDown()
        try:
            if chain is None:
                job, created = await self._store.create(
                    new, max_queued=self._max_queued, now=utcnow()
                )
                jobs = [job] if created else []
            else:
                jobs = await self._store.create_chain(
                    chain, max_queued=self._max_queued, now=utcnow()
                )
                job, created = jobs[0], jobs[0].id == new.id
        except QueueFull:
            raise QueueFull(self._max_queued, await self._retry_after_s()) from None
        self._files.settled(new.id)  # its uploads, if any, belong to a stored job now
        if created:
            for each in jobs:
                queued = before_start(each.id)
                log.info(
                    "job %s queued (%s, model %s)", each.id, each.kind, each.model, extra=queued
                )
                self._dispatcher.queued(each)
        return job, created

    async def _with_model_and_files(self, new: NewJob) -> tuple[NewJob, str | None]:
        """Refuse at once what could only fail later: a model this host does not have, and
        whatever the job's kind checks (`Kind.checked`: its inputs, dataset, format...).
        Returns the job as checked, and its model's task."""
        provided, task = await self._provided(new.model, new.kind)
        model = None  # `sim`, or a shipped architecture to train from scratch
        if not provided:
            model = await self._models.get(new.model)
            if not model.usable:
                raise ModelUnusable(new.model)
            task = model.task
        submission = Submission(new.spec, new.model, model, task)
        spec = await KINDS[new.kind].checked(submission, self._checks)
        return replace(new, spec=spec, model_id=None if model is None else model.id), task

    async def _chain(self, training: NewJob, then: ThenSteps, task: str | None) -> list[NewJob]:
        """The training and its steps, each checked as its kind checks a submission, against
        the task of the model the training will produce."""
        promote = then.promote
        baseline = False
        if promote is not None and promote.gate is not None and promote.gate.not_worse:
            baseline = await self._alias_points_somewhere(promote.alias)
        chain = chain_of(training, then, baseline_alias=baseline)
        checked = [chain[0]]
        for step in chain[1:]:
            deferred = step.model != SIM_MODEL
            submission = Submission(step.spec, step.model, None, task, deferred=deferred)
            checked.append(
                replace(step, spec=await KINDS[step.kind].checked(submission, self._checks))
            )
        return checked

    async def _alias_points_somewhere(self, alias: str) -> bool:
        try:
            await self._models.get(alias)
        except (ModelNotFound, AliasNotFound):  # not yet: the first promotion sets it
            return False
        return True

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

    async def stream_frames(self, job_id: str, since: int, limit: int) -> FramePage:
        """Up to `limit` frames with `seq` > `since` of a stream job, running or ended, from its
        segments."""
        job = await self._store.get(job_id)
        if job.kind is not JobKind.STREAM:
            raise NotAStream(job_id, job.kind)
        return await anyio.to_thread.run_sync(
            read_since, self._files.workdir(job_id), since, limit, limiter=self._file_limiter
        )

    async def snapshot(self, job_id: str) -> bytes:
        """A stream job's latest annotated snapshot (JPEG). Read whole: the runner replaces the
        file atomically, so a read never mixes two snapshots, and a file served by path could
        be replaced between its size and its bytes."""
        job = await self._store.get(job_id)
        if job.kind is not JobKind.STREAM:
            raise SnapshotNotFound(job_id)
        jpeg = await anyio.to_thread.run_sync(
            self._read_snapshot, job_id, limiter=self._file_limiter
        )
        if jpeg is None:
            raise SnapshotNotFound(job_id)
        return jpeg

    def _read_snapshot(self, job_id: str) -> bytes | None:
        try:
            return (self._files.workdir(job_id) / SNAPSHOT_FILE).read_bytes()
        except FileNotFoundError:
            return None

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
        running, recent = await self._work_in_hand()
        queued = {kind: await self._store.count_queued(kind) for kind in KINDS}
        wait = expected_wait_s(running, queued, recent, slots=self._total_slots, now=utcnow())
        return max(1, min(_MAX_RETRY_AFTER_S, math.ceil(wait)))

    async def _work_in_hand(self) -> tuple[list[Job], dict[JobKind, list[float]]]:
        """The running jobs, and the run times of recent jobs of each kind."""
        running = await self._store.list_jobs(
            JobFilter(states=(JobState.RUNNING,)), limit=self._total_slots, before_seq=None
        )
        recent = {kind: await self._store.recent_durations(_RECENT_RUNS, kind) for kind in KINDS}
        return running.jobs, recent

    async def queue(self, limit: int) -> QueueView:
        """The first `limit` jobs the dispatcher would start, in its order (`queue_view.py`)."""
        running, recent = await self._work_in_hand()
        order = self._dispatcher.queue_order()
        return await read_queue(self._store, order, running, recent, self._total_slots, limit)


def _ids(job: Job) -> dict[str, str]:
    return {"job_id": job.id}
