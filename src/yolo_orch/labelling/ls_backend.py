"""Label Studio's ML backend for one managed dataset (`/ls/{dataset}/...`): predictions from
the dataset's model through an inference job, annotations written into the dataset, and training
chains started from them. Knows nothing of HTTP; the job service and the model registry come in
through `Jobs` and `Models` (they sit above this package).

- predict: every task's image becomes one input of ONE inference job (an item of a managed
  dataset is read where it is; another image is read from Label Studio into a scratch folder);
  the job is awaited through its change events, and its entries become Label Studio results.
- webhook: an annotation created or updated sets its item's labels (`source="annotation"`); a task
  whose image is not an item of this dataset becomes a new item. Each created annotation counts;
  at `train_after` a training chain starts. START_TRAINING starts one too.
- train: one chain per dataset at a time: the last chain is returned while a step of it is still
  queued or running, and the training carries a unique key besides.
"""

from __future__ import annotations

import functools
import logging
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar
from urllib.parse import urlsplit

import anyio
import anyio.to_thread
import orjson
from pydantic import ValidationError

from yolo_orch.domain import Job, JobFilter, JobKind, JobState, Model, NewJob, Page
from yolo_orch.domain.managed_datasets import DatasetInfo
from yolo_orch.domain.specs import InferenceSpec, ResolvedFile, TrainingSpec
from yolo_orch.errors import (
    DatasetItemNotFound,
    DatasetNotFound,
    ErrorCode,
    InvalidJob,
    LabellingNotSet,
    ModelNotFound,
    PredictionFailed,
    TaskImageUnavailable,
    YoloOrchError,
)
from yolo_orch.files.managed_datasets import ManagedDatasets
from yolo_orch.labelling.ls_config import LabelConfig, parse_label_config
from yolo_orch.labelling.ls_images import ImageUnreadable, LabelStudioImages
from yolo_orch.labelling.ls_results import prediction, yolo_lines
from yolo_orch.params.chains import ThenSteps
from yolo_orch.params.inference import InferenceParams
from yolo_orch.params.labelling import LabellingParams
from yolo_orch.params.training import TrainingParams

log = logging.getLogger(__name__)

T = TypeVar("T")
ITEM_PATH = re.compile(r"/v1/datasets/(?P<name>[^/]+)/items/(?P<item>[^/]+)/image$")
"""A task image that is an item of a managed dataset (`api/datasets.py`'s route)."""
UNIQUE_FOR_S = 7 * 24 * 3600.0
"""A dataset's training stays the one training of its chains while queued or running."""
SINCE_TRAINING = "annotations_since_training"
LAST_CHAIN = "last_chain"
TASK_ITEMS = "ls_task_items"
"""`<project>:<task>` -> the item a task of Label Studio's own images became."""
ANNOTATION_ITEMS = "ls_annotation_items"
"""An annotation's id -> the item it labels (ANNOTATIONS_DELETED names annotations only)."""
_STORED = ("ANNOTATION_CREATED", "ANNOTATIONS_CREATED", "ANNOTATION_UPDATED")


class Jobs(Protocol):
    async def submit(self, new: NewJob, then: ThenSteps | None = None) -> tuple[Job, bool]: ...
    async def wait_until_finished(self, job_id: str, timeout_s: float) -> Job: ...
    async def result(self, job_id: str) -> bytes | Path: ...
    async def list_jobs(self, where: JobFilter, *, limit: int, before_seq: int | None) -> Page: ...


class Models(Protocol):
    async def get(self, ref: str) -> Model: ...


@dataclass(frozen=True)
class _Input:
    task: Mapping[str, Any]
    name: str
    path: Path


class LabelStudioBackend:
    def __init__(
        self,
        datasets: ManagedDatasets,
        jobs: Jobs,
        models: Models,
        images: LabelStudioImages,
        *,
        scratch: Path,
        predict_wait_s: float,
        file_limiter: anyio.CapacityLimiter,
    ) -> None:
        """`scratch`: where images read from Label Studio wait for their inference job (under
        a folder the runners read)."""
        self._datasets = datasets
        self._jobs = jobs
        self._models = models
        self._images = images
        self._scratch = scratch
        self._wait_s = predict_wait_s
        self._limiter = file_limiter
        self._locks: dict[str, anyio.Lock] = {}

    async def _files(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await anyio.to_thread.run_sync(
            functools.partial(call, *args, **kwargs), limiter=self._limiter
        )

    async def dataset(self, name: str) -> DatasetInfo:
        return await self._files(self._datasets.get, name)

    async def _info(self, name: str) -> tuple[DatasetInfo, LabellingParams]:
        info = await self._files(self._datasets.get, name)
        try:
            return info, LabellingParams.model_validate(info.labelling)
        except ValidationError as exc:
            raise InvalidJob(
                f"managed dataset {name!r} has labelling settings this server cannot use: "
                f"{exc.errors()[0]['msg']}",
                ErrorCode.INVALID_REQUEST,
            ) from None

    async def model_version(self, name: str) -> str:
        """What `/setup` answers: the id of the model predictions run now (an alias's current
        one), or the name of a model the runtime provides itself."""
        _, settings = await self._info(name)
        if settings.model is None:
            raise LabellingNotSet(name, "model")
        return (await self._model(settings.model))[0]

    async def _model(self, ref: str) -> tuple[str, str | None]:
        try:
            model = await self._models.get(ref)
        except ModelNotFound:
            return ref, None  # the runtime's own (`sim`); a submission says if it is not
        return model.id, model.task

    async def predict(
        self, name: str, tasks: Sequence[Mapping[str, Any]], label_config: str
    ) -> list[dict[str, Any]]:
        """One prediction per task, in order (`{"result", "score", "model_version"}`); a task
        whose image cannot be read gets an empty one."""
        info, settings = await self._info(name)  # an unknown dataset first: 404
        config = parse_label_config(label_config)
        if settings.model is None:
            raise LabellingNotSet(name, "model")
        version, task = await self._model(settings.model)
        if task is not None and task != info.task:
            raise InvalidJob(
                f"labelling.model {settings.model!r} is a {task} model; dataset {name!r} is "
                f"{info.task}",
                ErrorCode.TASK_MISMATCH,
            )
        await self._files(self._scratch.mkdir, parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self._scratch) as folder:
            inputs = [
                await self._input(task, index, config, Path(folder))
                for index, task in enumerate(tasks)
            ]
            readable = [each for each in inputs if each is not None]
            entries: dict[str, Mapping[str, Any]] = {}
            if readable:
                job = await self._infer(settings, info.task, readable)
                version = job.model_id or job.model
                entries = await self._entries(job.id)
        answers = []
        for each in inputs:
            entry = None if each is None else entries.get(each.name)
            found = prediction(entry or {}, info.task, config)
            if found.skipped:
                log.info(
                    "dataset %s: %d detections no label of the config shows", name, found.skipped
                )
            answers.append({"result": found.result, "score": found.score, "model_version": version})
        return answers

    async def _input(
        self, task: Mapping[str, Any], index: int, config: LabelConfig, folder: Path
    ) -> _Input | None:
        name = f"task-{task.get('id', index)}"
        url = str((task.get("data") or {}).get(config.image_key) or "")
        try:
            return _Input(task, name, await self._image_path(url, folder, name))
        except (TaskImageUnavailable, ImageUnreadable, DatasetNotFound, DatasetItemNotFound) as exc:
            log.warning("Label Studio task %s: no prediction: %s", task.get("id"), exc)
            return None

    async def _image_path(self, url: str, folder: Path, name: str) -> Path:
        item = item_of(url)
        if item is not None:
            return await self._files(self._datasets.item_image, *item)
        image, suffix = await self._images.read(url)
        path = folder / f"{name}{suffix}"
        await self._files(path.write_bytes, image)
        return path

    async def _infer(self, settings: LabellingParams, task: str, inputs: Sequence[_Input]) -> Job:
        assert settings.model is not None
        asked = dict(settings.predict)
        if task == "segment":
            asked.setdefault("mask_format", "polygon")
        try:
            params = InferenceParams.model_validate(asked).model_dump(exclude_none=True)
        except ValidationError as exc:
            raise InvalidJob(
                f"labelling.predict: {exc.errors()[0]['msg']}", ErrorCode.INVALID_REQUEST
            ) from None
        spec = InferenceSpec(
            inputs=[each.name for each in inputs],
            files=[ResolvedFile(path=str(each.path), name=each.name) for each in inputs],
            params=params,
        )
        job, _ = await self._jobs.submit(
            NewJob(kind=JobKind.INFERENCE, model=settings.model, spec=spec)
        )
        job = await self._jobs.wait_until_finished(job.id, self._wait_s)
        if not job.state.is_terminal:
            raise PredictionFailed(job.id, f"did not end within {self._wait_s:g} s (it goes on)")
        if job.state is not JobState.SUCCEEDED:
            why = "" if job.error is None else f": {job.error.message}"
            raise PredictionFailed(job.id, f"ended {job.state.value}{why}")
        return job

    async def _entries(self, job_id: str) -> dict[str, Mapping[str, Any]]:
        kept = await self._jobs.result(job_id)
        raw = kept if isinstance(kept, bytes) else await self._files(kept.read_bytes)
        result = await self._files(orjson.loads, raw)
        return {str(entry.get("source")): entry for entry in result.get("images") or []}

    async def webhook(self, name: str, payload: Mapping[str, Any]) -> dict[str, Any]:
        """What one Label Studio webhook does here; actions other than those above are
        answered and ignored."""
        action = str(payload.get("action", ""))
        if action == "START_TRAINING":
            return {"status": "ok", "job": (await self.train(name)).id}
        if action == "ANNOTATIONS_DELETED":
            return {"status": "ok", "items": await self._unannotated(name, payload)}
        if action not in _STORED:
            return {"status": "ignored", "action": action}
        project = payload.get("project") or {}
        await self.dataset(name)  # an unknown dataset first: 404
        config = parse_label_config(str(project.get("label_config", "")))
        annotations, tasks = payload.get("annotation"), payload.get("task")
        if action != "ANNOTATIONS_CREATED":
            annotations, tasks = [annotations], [tasks]
        items = []
        async with self._lock(name):
            for annotation, task in zip(annotations or [], tasks or [], strict=False):
                if isinstance(annotation, Mapping) and not annotation.get("was_cancelled"):
                    items.append(await self._annotated(name, config, project, annotation, task))
        answer: dict[str, Any] = {"status": "ok", "items": [item for item in items if item]}
        created = sum(1 for item in items if item) if action != "ANNOTATION_UPDATED" else 0
        started = await self._count(name, created) if created else None
        if started is not None:
            answer["job"] = started  # the training chain the count started
        return answer

    def _lock(self, name: str) -> anyio.Lock:
        return self._locks.setdefault(name, anyio.Lock())

    async def _annotated(
        self,
        name: str,
        config: LabelConfig,
        project: Mapping[str, Any],
        annotation: Mapping[str, Any],
        task: Mapping[str, Any],
    ) -> str | None:
        """The item the annotation labels now (None: nothing a dataset can hold, such as a
        classify annotation choosing no class)."""
        info = await self._files(self._datasets.get, name)
        lines = yolo_lines(
            annotation.get("result") or [], info.task, info.names, config, info.kpt_shape
        )
        if info.task == "classify" and not lines:
            return None
        url = str((task.get("data") or {}).get(config.image_key) or "")
        key = f"{project.get('id')}:{task.get('id')}"
        item = await self._item_for(name, info, url, key)
        if item is None:
            image, suffix = await self._image_bytes(task.get("id"), url)
            item = await self._files(
                self._datasets.add, name, image, suffix, lines, source="annotation"
            )
            await self._remember(name, TASK_ITEMS, key, item)
        else:
            await self._files(self._datasets.set_labels, name, item, lines, source="annotation")
        await self._remember(name, ANNOTATION_ITEMS, str(annotation.get("id")), item)
        return item

    async def _item_for(self, name: str, info: DatasetInfo, url: str, key: str) -> str | None:
        own = item_of(url)
        if own is not None and own[0] == name:
            return own[1]
        known = info.labelling.get(TASK_ITEMS, {}).get(key)
        return str(known) if known is not None else None

    async def _image_bytes(self, task_id: object, url: str) -> tuple[bytes, str]:
        own = item_of(url)
        try:
            if own is not None:  # another managed dataset's item: copied into this one
                path = await self._files(self._datasets.item_image, *own)
                return await self._files(path.read_bytes), path.suffix
            return await self._images.read(url)
        except (ImageUnreadable, DatasetNotFound, DatasetItemNotFound) as exc:
            raise TaskImageUnavailable(task_id, str(exc)) from None

    async def _remember(self, name: str, key: str, field: str, item: str) -> None:
        info = await self._files(self._datasets.get, name)
        known = {**info.labelling.get(key, {}), field: item}
        await self._files(self._datasets.update_labelling, name, {key: known})

    async def _unannotated(self, name: str, payload: Mapping[str, Any]) -> list[str]:
        """Items whose annotation was deleted keep their labels, no longer as a person's."""
        items = []
        async with self._lock(name):
            info = await self._files(self._datasets.get, name)
            known = info.labelling.get(ANNOTATION_ITEMS, {})
            for annotation in payload.get("annotations") or []:
                item = (
                    known.get(str(annotation.get("id")))
                    if isinstance(annotation, Mapping)
                    else None
                )
                if item is None:
                    continue
                try:
                    lines = await self._files(self._datasets.item_labels, name, item)
                    await self._files(self._datasets.set_labels, name, item, lines, source="model")
                except DatasetItemNotFound:
                    continue
                items.append(str(item))
        return items

    async def _count(self, name: str, created: int) -> str | None:
        """Count created annotations; at `train_after`, start a chain (its id). A chain that
        cannot start is logged, and the count goes on."""
        async with self._lock(name):
            info, settings = await self._info(name)
            count = int(info.labelling.get(SINCE_TRAINING, 0)) + created
            await self._files(self._datasets.update_labelling, name, {SINCE_TRAINING: count})
        if settings.train_after is None or count < settings.train_after:
            return None
        try:
            return (await self.train(name)).id
        except YoloOrchError as exc:
            log.warning("dataset %s: %d annotations, but no training started: %s", name, count, exc)
            return None

    async def train(self, name: str) -> Job:
        """The training of the dataset's chain: a new one (train, validate, promote the alias
        if the gate passes), or the one under way."""
        async with self._lock(name):
            info, settings = await self._info(name)
            running = await self._chain_under_way(info)
            if running is not None:
                return running
            model = settings.train_from or settings.model
            if model is None:
                raise LabellingNotSet(name, "model")
            job, _ = await self._jobs.submit(_training(name, model, settings), _then(settings))
            changes = {LAST_CHAIN: job.id, SINCE_TRAINING: 0}
            await self._files(self._datasets.update_labelling, name, changes)
            log.info("dataset %s: training chain %s started (%s)", name, job.id, model)
            return job

    async def _chain_under_way(self, info: DatasetInfo) -> Job | None:
        chain = info.labelling.get(LAST_CHAIN)
        if not isinstance(chain, str):
            return None
        page = await self._jobs.list_jobs(JobFilter(chain_id=chain), limit=64, before_seq=None)
        if all(job.state.is_terminal for job in page.jobs):
            return None
        return next((job for job in page.jobs if job.id == chain), page.jobs[0])


def item_of(url: str) -> tuple[str, str] | None:
    """The managed dataset and item a task's image URL names, if it is one's item route."""
    found = ITEM_PATH.search(urlsplit(url).path)
    return None if found is None else (found["name"], found["item"])


def _training(name: str, model: str, settings: LabellingParams) -> NewJob:
    try:
        params = TrainingParams.model_validate(settings.train).model_dump(exclude_none=True)
    except ValidationError as exc:
        raise InvalidJob(
            f"labelling.train: {exc.errors()[0]['msg']}", ErrorCode.INVALID_REQUEST
        ) from None
    return NewJob(
        kind=JobKind.TRAINING,
        model=model,
        spec=TrainingSpec(dataset=f"dataset:{name}", params=params),
        unique_key=f"labelling:{name}",
        unique_for_s=UNIQUE_FOR_S,
    )


def _then(settings: LabellingParams) -> ThenSteps:
    steps: dict[str, Any] = {"validate": {}}
    alias = settings.promoted_alias()
    if alias is not None:
        gate = None if settings.gate is None else settings.gate.model_dump()
        steps["promote"] = {"alias": alias, "gate": gate}
    return ThenSteps.model_validate(steps)
