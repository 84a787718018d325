"""What a training or validation job reads: its model (a checked registry file, or a config that
ships with ultralytics) and its dataset (checked again when the job starts: it may have changed
since submission, a `download` key added, a path pointed elsewhere)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from yolo_orch.domain.specs import DatasetSpec
from yolo_orch.errors import InvalidJob, InvalidJobInput, PathOutsideRoots
from yolo_orch.files.jobfiles import write_atomic
from yolo_orch.files.task_data import ImageFolder, load_task_dataset
from yolo_orch.registry.weights import (
    ModelTampered,
    ResolvedWeights,
    inspect_checkpoint,
    sha256_file,
)
from yolo_orch.runners.base import RunContext

__all__ = ["TASK_HEADS", "job_dataset", "registry_weights", "shipped_architecture"]

ResolveWeights = Callable[[str], ResolvedWeights]

TASK_HEADS = {
    "Detect": "detect",
    "v10Detect": "detect",
    "Segment": "segment",
    "Segment26": "segment",
    "Pose": "pose",
    "Pose26": "pose",
    "OBB": "obb",
    "OBB26": "obb",
    "Classify": "classify",
    "SemanticSegment": "semantic",
    "Depth": "depth",
}
"""The heads ultralytics' task trainers train, and their task. RT-DETR, World and YOLOE heads
need trainers of their own (and prompts), so their configs are not offered."""
_ARCHITECTURE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\.yaml")


def shipped_architecture(name: str) -> str:
    """The task of `name`, a model config that ships with ultralytics (`yolo11n-seg.yaml`)."""
    from ultralytics.nn.tasks import yaml_model_load
    from ultralytics.utils import ROOT

    if not _ARCHITECTURE.fullmatch(name):
        raise InvalidJobInput(
            f"model {name!r} is neither a registry model nor a shipped config name"
        )
    # ultralytics drops the scale letter to find the file: yolo11n-seg.yaml -> yolo11-seg.yaml
    unified = re.sub(r"(\d+)([nslmx])(.+)?$", r"\1\3", name.removesuffix(".yaml")) + ".yaml"
    if not any((Path(ROOT) / "cfg" / "models").rglob(unified)):
        raise InvalidJobInput(f"{name!r} is not a model config shipped with ultralytics")
    config: dict[str, Any] = yaml_model_load(name)  # type: ignore[no-untyped-call]
    head = config.get("head") or [[None, None, None]]
    task = TASK_HEADS.get(str(head[-1][2]))
    if task is None:
        raise InvalidJobInput(f"{name!r} has a {head[-1][2]} head, which this server cannot train")
    return task


def registry_weights(resolve: ResolveWeights, ctx: RunContext) -> tuple[Path, str]:
    """The job's registry model, checked against its fingerprint, and its task."""
    if ctx.job.model_id is None:
        raise InvalidJobInput(f"model {ctx.job.model!r} is not a registry model")
    weights = resolve(ctx.job.model_id)
    path = weights.path
    if not path.is_file():  # ultralytics would go looking for a missing .pt online
        raise FileNotFoundError(f"weights file {path.name} is missing")
    actual = sha256_file(path)
    if actual != weights.sha256:
        raise ModelTampered(path, weights.sha256, actual)
    return path, inspect_checkpoint(path).task


def job_dataset(ctx: RunContext, task: str, data_roots: Sequence[Path]) -> tuple[str, list[str]]:
    """The job's checked dataset as ultralytics will read it, and its split names.

    A data.yaml is written to the job's folder with absolute paths and nothing else; an image
    folder (classify) is passed by its real path."""
    import yaml

    raw = ctx.job.spec_as(DatasetSpec).dataset_path
    if raw is None or not os.path.isabs(raw):
        raise InvalidJobInput("spec.dataset_path must be the absolute path of a checked dataset")
    try:
        dataset = load_task_dataset(task, Path(raw), data_roots)
    except (InvalidJob, PathOutsideRoots) as e:
        raise InvalidJobInput(e.message) from e
    if isinstance(dataset, ImageFolder):
        return str(dataset.root), list(dataset.splits)
    target = ctx.workdir / "data.yaml"
    write_atomic(target, yaml.safe_dump(dataset.for_ultralytics(), sort_keys=False).encode())
    return str(target), list(dataset.splits)
