"""What a run on a Ray node is handed (`NodeTask`), put together on the server: the job's folder,
its inputs read as bytes under the same rules as on one host, and its model (and the exported
variant it runs, picked here by the rule a thread lane applies) as parcels in Ray's object
store. Nothing outside the data roots (or the job's own uploads) is ever read for a node."""

from __future__ import annotations

import contextlib
import os
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

import anyio.to_thread

from yolo_orch.domain import Job
from yolo_orch.domain.variants import ExportFormat, LaneRuntime, variant_for
from yolo_orch.errors import InvalidJobInput
from yolo_orch.files import images
from yolo_orch.files.inputs import open_contained
from yolo_orch.files.jobfiles import INPUTS_DIR
from yolo_orch.files.videos import is_video
from yolo_orch.kinds import KINDS
from yolo_orch.params.inference import InferenceParams
from yolo_orch.ray_cluster.node_cache import VariantOffer, WeightsOffer
from yolo_orch.ray_cluster.node_runtime import NodeRuntimeSpec, ShippedInput
from yolo_orch.ray_cluster.node_side import NodeTask, travels
from yolo_orch.registry.resolutions import ResolvedVariant
from yolo_orch.runners.base import RunContext
from yolo_orch.runners.decode import InputFile, read_inputs
from yolo_orch.runners.formats import runnable_formats


@dataclass(frozen=True)
class ServerWeights:
    """A job's registry model as the server keeps it."""

    model_id: str
    sha256: str
    name: str
    task: str
    path: Path


WeightsOf = Callable[[Job], Awaitable[ServerWeights | None]]
"""A job's registry model, or None for a model the runtime provides."""
VariantsOf = Callable[[str], Awaitable[list[ResolvedVariant]]]
"""A model id's usable variants, newest first, with their folders on the server."""


@dataclass(frozen=True)
class InputRules:
    """What of a job's inputs may travel to a node: the host's own limits, and a bound on the
    bytes one task carries."""

    data_roots: tuple[Path, ...]
    max_files: int
    max_image_pixels: int
    max_bytes: int


_PARCELS_KEPT = 4


class TaskBuilder:
    """Builds each run's `NodeTask`."""

    def __init__(
        self,
        weights_of: WeightsOf,
        runtime: NodeRuntimeSpec,
        rules: InputRules,
        *,
        variants_of: VariantsOf,
        cache_dir: Path,
        cache_models: int,
        put: Callable[[object], Any],
    ) -> None:
        """`put`: stores a value in Ray's object store and returns the ref (`ray.put`)."""
        self._weights_of = weights_of
        self._variants_of = variants_of
        self._runnable = runnable_formats()
        self._runtime = runtime
        self._rules = rules
        self._cache_dir = cache_dir
        self._cache_models = cache_models
        self._put = put
        self._parcels: OrderedDict[str, Any] = OrderedDict()
        """Object refs to weights and variants' files already put in Ray's object store, by
        sha256 or manifest digest (the newest few, so their bytes are put once while in use)."""

    async def __call__(self, ctx: RunContext) -> NodeTask:
        inputs, variant = None, None
        if KINDS[ctx.job.kind].ships_inputs and self._runtime.name != "simulated":
            inputs = await anyio.to_thread.run_sync(ship_inputs, ctx, self._rules)
            variant = await self._variant_offer(ctx)
        return NodeTask(
            job=ctx.job,
            lanes=ctx.devices,
            runtime=self._runtime,
            seed=await anyio.to_thread.run_sync(read_folder, ctx.workdir),
            inputs=inputs,
            weights=await self._offer(ctx.job),
            variant=variant,
            cache_dir=str(self._cache_dir),
            cache_models=self._cache_models,
        )

    async def _offer(self, job: Job) -> WeightsOffer | None:
        weights = await self._weights_of(job)
        if weights is None:
            return None
        return WeightsOffer(
            model_id=weights.model_id,
            sha256=weights.sha256,
            name=weights.name,
            task=weights.task,
            parcel=[await self._parcel(weights.sha256, weights.path.read_bytes)],
        )

    async def _variant_offer(self, ctx: RunContext) -> VariantOffer | None:
        job = ctx.job
        params = InferenceParams.from_job(job.params)
        if job.model_id is None or params.format == "pt":
            return None
        picked = pick_variant(
            params, ctx.devices[0], await self._variants_of(job.model_id), self._runnable
        )
        if picked is None:
            return None
        read = partial(read_variant_files, picked)
        return VariantOffer(picked.variant, [await self._parcel(picked.variant.sha256, read)])

    async def _parcel(self, digest: str, read: Callable[[], object]) -> Any:
        """The object ref to what `read` gives, put in Ray's object store once while kept."""
        parcel = self._parcels.get(digest)
        if parcel is None:
            data = await anyio.to_thread.run_sync(read)
            parcel = await anyio.to_thread.run_sync(self._put, data)
            self._parcels[digest] = parcel
            while len(self._parcels) > _PARCELS_KEPT:
                self._parcels.popitem(last=False)
        self._parcels.move_to_end(digest)
        return parcel


def pick_variant(
    params: InferenceParams,
    lane: str,
    variants: Sequence[ResolvedVariant],
    runnable: frozenset[ExportFormat],
) -> ResolvedVariant | None:
    """The variant an inference job runs on the Ray lane `lane`, or None for the `.pt`: the
    rule a thread lane applies (`variants.variant_for`), for the lane's device on its node (its
    CPU, or a CUDA device). The node is taken to run the formats the server can (the same
    release is installed everywhere); its runner applies the rule again to what arrived, with
    its own runtimes. A TensorRT engine, built for one GPU model and its software, is never
    picked for a node from here."""
    device = "cpu" if lane.endswith("/cpu") else "cuda:0"
    picked = variant_for(
        [resolved.variant for resolved in variants],
        params.format,
        LaneRuntime(device, runnable),
        imgsz=params.imgsz,
        half=params.half,
    )
    return next((r for r in variants if r.variant is picked), None)


def read_variant_files(resolved: ResolvedVariant) -> dict[str, bytes]:
    """Blocking. The variant's files on the server, by their paths in its manifest: verified
    on the node, not here (where one that is missing fails the job `model_tampered`, as a
    thread lane's load does)."""
    files = {}
    for name in resolved.variant.files:
        with contextlib.suppress(FileNotFoundError):
            files[name] = (resolved.folder / name).read_bytes()
    return files


def ship_inputs(ctx: RunContext, rules: InputRules) -> list[ShippedInput]:
    """Blocking. The job's files (`spec.files`), each read only while it is inside the data
    roots or the job's uploads where it is opened (`inputs.open_contained`). An image that is
    refused, or whose header says it has more than `max_image_pixels`, travels as the reason
    (its entry in the result says it, as on one host); a video that cannot be read fails the
    job, as on one host."""
    sources = read_inputs(ctx.job)
    if len(sources) > rules.max_files:
        raise InvalidJobInput(
            f"the job names {len(sources)} files, more than {rules.max_files} (max_files_per_job)"
        )
    roots = [*rules.data_roots, ctx.workdir / INPUTS_DIR]
    budget = rules.max_bytes
    shipped = []
    for source in sources:
        item = _read_input(source, roots, rules.max_image_pixels, budget)
        budget -= len(item.data or b"")
        shipped.append(item)
    return shipped


def _read_input(source: InputFile, roots: list[Path], max_pixels: int, budget: int) -> ShippedInput:
    reason, data = None, None
    try:
        with open_contained(source.path, roots) as file:
            if not is_video(source.path):
                reason = images.decode_refusal(file, max_pixels)
            if reason is None:
                data = _read_within(file, budget)
                if data is None:
                    raise _TooLarge()
    except _TooLarge:
        raise
    except InvalidJobInput as e:
        reason = e.message
    except OSError as e:
        reason = f"cannot read the file: {e.strerror or e}"
    if reason is not None and is_video(source.path):
        raise InvalidJobInput(reason)
    return ShippedInput(source.name, source.path.name, data, reason)


def _read_within(file: BinaryIO, budget: int) -> bytes | None:
    """The file's bytes, or None when it holds more than `budget`."""
    size = os.fstat(file.fileno()).st_size
    if size > budget:
        return None
    data = file.read(size + 1)  # bounded by what it holds, not by the (large) budget
    return data if len(data) <= budget else None


class _TooLarge(InvalidJobInput):
    """Fails the job (`invalid_input`), unlike one file's refusal."""

    def __init__(self) -> None:
        super().__init__(
            "the job's inputs are larger than ray_max_input_bytes, the most one job carries "
            "to a Ray node"
        )


def read_folder(folder: Path) -> dict[str, bytes]:
    """Blocking. The job folder's files that go to the node (`node_side.travels`)."""
    if not folder.is_dir():
        return {}
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and travels(path.relative_to(folder).as_posix())
    }
