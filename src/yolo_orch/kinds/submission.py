"""What a kind may check of a submission before the job is stored: the checks that need this
host (its data roots, registry, lanes and exporters), each refusing at once what could only fail
later on a lane. Each kind's module picks the ones it needs (`Kind.checked`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

import anyio
import anyio.to_thread

from yolo_orch.domain import SIM_MODEL, JsonObject, Model
from yolo_orch.domain.managed_datasets import DatasetInfo, dataset_ref_name
from yolo_orch.domain.specs import JobSpec, ResolvedFile
from yolo_orch.domain.streams import NO_HOSTS, AllowedHosts
from yolo_orch.domain.variants import ExportFormat, available_formats, export_refusal
from yolo_orch.errors import DatasetNotFound, ErrorCode, InvalidJob, ModelNameTaken, ModelNotFound
from yolo_orch.files.class_names import ClassNameLimits
from yolo_orch.files.inputs import InputLimits, resolve_inputs
from yolo_orch.files.managed_datasets import ManagedDatasets
from yolo_orch.files.paths import is_glob
from yolo_orch.files.task_data import check_task_dataset, load_task_dataset
from yolo_orch.files.videos import refuse_unreadable_videos
from yolo_orch.registry.models import ModelRegistry

_Spec = TypeVar("_Spec", bound=JobSpec)


@dataclass(frozen=True)
class Submission(Generic[_Spec]):
    """A job about to be stored, with the model it names."""

    spec: _Spec
    model_name: str
    model: Model | None
    """The registry's model; None for one the runtime has itself (`sim`, a shipped
    architecture)."""
    task: str | None
    """The model's task; None for `sim`."""
    deferred: bool = False
    """A chain's step: its model is the one its training will produce (`job:<id>`)."""

    @property
    def simulated(self) -> bool:
        return self.model is None and self.model_name == SIM_MODEL


@dataclass(frozen=True)
class SubmissionChecks:
    """`file_limiter` bounds the threads doing request-time file work; `walk_limiter` those
    expanding globs, the one kind a client can make costly (see `JobService`). `no_exports`: the
    lanes build no exports (Ray nodes, which never write the registry). `stream_hosts`: the
    network hosts streams may open; `stream_fps`: the most frames per second any lane's streams
    may take together (0: no lane takes streams)."""

    models: ModelRegistry
    lane_ids: tuple[str, ...]
    data_roots: tuple[Path, ...]
    class_name_limits: ClassNameLimits
    input_limits: InputLimits
    max_image_pixels: int
    file_limiter: anyio.CapacityLimiter
    walk_limiter: anyio.CapacityLimiter
    no_exports: bool = False
    stream_hosts: AllowedHosts = NO_HOSTS
    stream_fps: float = 0.0
    datasets: ManagedDatasets | None = None
    """The managed datasets a job's `dataset: "dataset:<name>"` names."""
    no_capture: bool = False
    """The lanes capture no images (Ray's): `params.capture` is refused."""

    async def format_available(self, model: Model, params: JsonObject) -> None:
        """An inference job that names a format the model has no usable variant of, for the
        job's imgsz and half, is refused now (`auto` falls back to the .pt, which always runs)."""
        wanted = params.get("format", "auto")
        if wanted in ("auto", "pt"):
            return
        imgsz, half, cuda = params["imgsz"], params["half"], self._has_cuda_lanes
        variants = await self.models.variants.list_for(model.id)
        available = available_formats(variants, imgsz=imgsz, half=half, cuda=cuda)
        if wanted not in available:
            precision = "half" if half else "full precision"
            raise InvalidJob(
                f"model {model.name!r} has no usable {wanted} variant for imgsz {imgsz} "
                f"({precision}); formats it can run: {', '.join(available)}",
                code=ErrorCode.FORMAT_NOT_AVAILABLE,
            )

    @property
    def _has_cuda_lanes(self) -> bool:
        # a Ray lane is `<node>/cuda:<i>`
        return any(lane.rpartition("/")[2].startswith("cuda:") for lane in self.lane_ids)

    def buildable(self, export_format: ExportFormat, *, half: bool) -> None:
        """An export this host cannot build is refused now, not failed on a lane later."""
        if self.no_exports:
            raise InvalidJob(
                "exports do not run on Ray lanes: export on a server with the thread executor, "
                "or import the exported files as a variant (POST /v1/models/{ref}/variants)",
                code=ErrorCode.EXPORT_UNSUPPORTED,
            )
        if reason := export_refusal(export_format, half=half, lanes=self.lane_ids):
            raise InvalidJob(reason, code=ErrorCode.EXPORT_UNSUPPORTED)

    async def resolved_files(self, inputs: list[str]) -> list[ResolvedFile]:
        """The inputs as readable files under the data roots, globs expanded."""
        walks = any(is_glob(pattern) for pattern in inputs)
        return await anyio.to_thread.run_sync(
            self._resolve, inputs, limiter=self.walk_limiter if walks else self.file_limiter
        )

    def _resolve(self, inputs: list[str]) -> list[ResolvedFile]:
        paths = resolve_inputs(inputs, self.data_roots, self.input_limits)
        return [
            ResolvedFile(path=str(path), name=_display_name(path, self.data_roots))
            for path in paths
        ]

    async def readable_videos(self, files: Sequence[ResolvedFile]) -> None:
        """Videos OpenCV cannot read, or whose frames are too large, are refused now."""
        await anyio.to_thread.run_sync(
            refuse_unreadable_videos,
            [file.stored() for file in files],
            self.max_image_pixels,
            limiter=self.file_limiter,
        )

    async def dataset(self, dataset: str | None, split: str | None, task: str | None) -> str:
        """The absolute path of a dataset under the data roots that fits the model's task
        (`task_mismatch`), with the split a validation scores."""
        if dataset is None:  # the request's own validation says so first
            raise InvalidJob("dataset is required", code=ErrorCode.INVALID_REQUEST)
        if task is None:  # shipped architectures and registry models always have one
            raise InvalidJob("the model has no task", code=ErrorCode.TASK_MISMATCH)
        if (name := dataset_ref_name(dataset)) is not None:
            return await self._managed_path(name, split, task)
        path, found = await anyio.to_thread.run_sync(
            check_task_dataset,
            task,
            dataset,
            self.data_roots,
            self.class_name_limits,
            limiter=self.file_limiter,
        )
        if split is not None and split not in found.splits:
            raise InvalidJob(f"{dataset!r} has no {split!r} split", ErrorCode.INVALID_DATASET)
        return str(path)

    async def simulated_dataset(self, dataset: str | None) -> str | None:
        """For the simulated model, which reads no dataset: the path of the managed dataset
        `dataset` names, which must exist; None for a path (not checked)."""
        name = None if dataset is None else dataset_ref_name(dataset)
        if name is None:
            return None
        await self.managed_dataset(name, None)
        return str(await anyio.to_thread.run_sync(self._managed_datasets().data_yaml, name))

    async def managed_dataset(self, name: str, task: str | None) -> DatasetInfo:
        """The managed dataset `name`, refused (422) when there is none (`dataset_not_found`)
        or it is of another task than `task` (`task_mismatch`; None: any)."""
        datasets = self._managed_datasets()
        try:
            info = await anyio.to_thread.run_sync(datasets.get, name, limiter=self.file_limiter)
        except DatasetNotFound as e:
            raise InvalidJob(e.message, code=ErrorCode.DATASET_NOT_FOUND) from None
        if task is not None and info.task != task:
            raise InvalidJob(
                f"dataset {name!r} is a {info.task} dataset; the model is {task}",
                code=ErrorCode.TASK_MISMATCH,
            )
        return info

    async def _managed_path(self, name: str, split: str | None, task: str) -> str:
        """The checked path a job reads of a managed dataset with items in each split it
        uses (`split`, or train and val for a training)."""
        info = await self.managed_dataset(name, task)
        for needed in ("train", "val") if split is None else (split,):
            counts = info.splits.get(needed)
            if counts is None or counts.images == 0:
                raise InvalidJob(
                    f"dataset {name!r} has no items in {needed!r} yet", ErrorCode.INVALID_DATASET
                )
        datasets = self._managed_datasets()
        path = await anyio.to_thread.run_sync(datasets.data_yaml, name)
        await anyio.to_thread.run_sync(
            load_task_dataset,
            task,
            path,
            (*self.data_roots, datasets.root),
            self.class_name_limits,
            limiter=self.file_limiter,
        )
        return str(path)

    async def capture_into(self, capture: JsonObject | None, task: str | None) -> None:
        """A job's `params.capture` names a managed dataset of the model's task (`sim`'s:
        detect, the boxes it finds), on lanes that capture."""
        if capture is None:
            return
        if self.no_capture:
            raise InvalidJob(
                "capture runs on this server's own lanes, not on Ray lanes (docs/capture.md)",
                code=ErrorCode.CAPTURE_UNSUPPORTED,
            )
        await self.managed_dataset(str(capture["into"]), task or "detect")

    def _managed_datasets(self) -> ManagedDatasets:
        if self.datasets is None:
            raise InvalidJob(
                "this server keeps no managed datasets", code=ErrorCode.DATASET_NOT_FOUND
            )
        return self.datasets

    async def output_name_free(self, name: str | None) -> None:
        """A training job that would end by failing to register its model is refused now."""
        if name is None:
            return
        try:
            await self.models.get(name)
        except ModelNotFound:
            return
        raise ModelNameTaken(name)


def _display_name(path: Path, roots: Sequence[Path]) -> str:
    """The file as the client named it: relative to its data root, never a server path."""
    for root in roots:
        real_root = Path(os.path.realpath(root))
        if path.is_relative_to(real_root):
            return str(path.relative_to(real_root))
    return path.name
