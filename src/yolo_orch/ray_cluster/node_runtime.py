"""The runtime a job runs with on a Ray node: the one the server would run (`runtime = "auto"`:
ultralytics, `runners.yolo`; or the simulated one), built on the node with the node's own folders.
Its weights (and the exported variant it runs) come from the node's verified cache, its images
were shipped as bytes into the job's folder on the node, and its dataset must be under
`shared_data_roots`, which every node sees."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from yolo_orch.domain import Job, JsonObject
from yolo_orch.domain.specs import DatasetSpec, InferenceSpec, ResolvedFile
from yolo_orch.errors import DatasetNotShared
from yolo_orch.files.jobfiles import INPUTS_DIR
from yolo_orch.params.slicing import DEFAULT_MAX_SLICES_PER_IMAGE
from yolo_orch.ray_cluster.node_cache import NodeModelCache
from yolo_orch.ray_cluster.registration import pending_model
from yolo_orch.registry.resolutions import ResolvedVariant
from yolo_orch.registry.weights import ResolvedWeights
from yolo_orch.runners.base import Runner, Runtime
from yolo_orch.runners.export import ExportedFiles
from yolo_orch.runners.simulated import SimulatedRuntime
from yolo_orch.setting_hints import env_var, set_setting


@dataclass(frozen=True)
class NodeRuntimeSpec:
    """The server's runtime settings that a node builds its runtime from."""

    name: str
    """`settings.runtime`: "auto" (ultralytics) or "simulated"."""
    model_cache_size: int
    cpu_threads: int | None
    max_image_pixels: int
    shared_data_roots: tuple[str, ...]
    """Folders every node sees at the same path: the only place datasets are read from."""
    max_slices_per_image: int = DEFAULT_MAX_SLICES_PER_IMAGE


@dataclass(frozen=True)
class ShippedInput:
    """One of an inference job's files, as the server read it (in `spec.files` order)."""

    name: str
    """What the client called it."""
    file_name: str
    """Its file's own name (its suffix says image or video; annotated outputs take its stem)."""
    data: bytes | None
    refused: str | None = None
    """Why the server would not read it (it now leads outside the data roots, it has more
    pixels than `max_image_pixels`, ...): the job's entry for it says so, as on one host."""


def node_runtime(
    spec: NodeRuntimeSpec, lane_count: int, cache: NodeModelCache, config_dir: Path
) -> Runtime:
    """Blocking: the real runtime imports torch and ultralytics (once per worker process)."""
    if spec.name == "simulated":
        return SimulatedRuntime(lane_count)
    from yolo_orch.files.images import limit_decoders
    from yolo_orch.runners.yolo import UltralyticsRuntime

    limit_decoders(spec.max_image_pixels)
    return UltralyticsRuntime(
        NodeModels(cache),
        config_dir,
        model_cache_size=spec.model_cache_size,
        data_roots=[Path(root) for root in spec.shared_data_roots],
        cpu_threads=spec.cpu_threads,
        max_image_pixels=spec.max_image_pixels,
        max_slices_per_image=spec.max_slices_per_image,
    )


class NodeModels:
    """The runners' models on a node (`runners.yolo.ModelAccess`): weights from the node's
    verified cache; nothing is registered here, since only the server writes the registry."""

    def __init__(self, cache: NodeModelCache) -> None:
        self._cache = cache

    def resolve(self, ref: str) -> ResolvedWeights:
        return self._cache.resolve(ref)

    def resolve_variants(self, model_id: str) -> list[ResolvedVariant]:
        """The variant the server picked for the job (and those of the model's other jobs
        running here), verified in the node's cache: the runner picks from them by the rule
        the server picked with."""
        return self._cache.variants_of(model_id)

    def register_model(self, path: Path, name: str, job_id: str) -> JsonObject:
        """Handed back: the server registers the file once it is back in the job's folder."""
        return pending_model(path, name)

    def register_variant(self, files: ExportedFiles) -> JsonObject:
        raise RuntimeError("exports do not run on Ray nodes")

    def watched(self, runner: Runner) -> Runner:
        """A tampered model comes back as a `model_tampered` failure; the server retires it."""
        return runner


def check_shared_dataset(job: Job, roots: Sequence[str], node: str) -> None:
    """A job's dataset must be under a shared root and there on this node (a root not mounted
    here, or a dataset outside every root, would otherwise fail deep inside ultralytics)."""
    if not isinstance(job.spec, DatasetSpec) or job.spec.dataset_path is None:
        return
    raw = job.spec.dataset_path
    shown = job.spec.dataset or Path(raw).name
    if not roots:
        raise DatasetNotShared(
            f"dataset {shown!r} cannot reach Ray node {node}: the server has no "
            "shared_data_roots (folders every node sees): "
            + set_setting("shared_data_roots", '["/mnt/shared"]')
        )
    real = Path(os.path.realpath(raw))
    if not any(real.is_relative_to(os.path.realpath(root)) for root in roots):
        raise DatasetNotShared(
            f"dataset {shown!r} is not under shared_data_roots, the folders every Ray node "
            "sees: on a Ray cluster a dataset must be under a root in both data_roots and "
            f"shared_data_roots ({env_var('data_roots')}, {env_var('shared_data_roots')})"
        )
    if not real.exists():
        raise DatasetNotShared(
            f"dataset {shown!r} is not on Ray node {node}: is its shared root mounted there?"
        )


def place_inputs(job: Job, inputs: list[ShippedInput], workdir: Path) -> Job:
    """Write the shipped files into the job's folder on this node (where the runner reads a
    job's own inputs) and point `spec.files` at them."""
    files: list[ResolvedFile] = []
    for index, shipped in enumerate(inputs):
        file_name = shipped.file_name if _plain_name(shipped.file_name) else "input"
        path = workdir / INPUTS_DIR / f"{index:05d}" / file_name
        refused = None
        if shipped.data is None:
            refused = shipped.refused or "refused by the server"
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(shipped.data)
        files.append(ResolvedFile(path=str(path), name=shipped.name, refused=refused))
    spec = job.spec_as(InferenceSpec).model_copy(update={"files": files})
    return replace(job, spec=spec)


def _plain_name(name: str) -> bool:
    return bool(name) and name not in (".", "..") and "/" not in name and "\x00" not in name
