"""Which dataset each task reads, and whether a job's dataset fits its model's task.

- `classify` reads an image folder: `root/train/<class>/*`, `root/val/<class>/*` (and optionally
  `root/test/<class>/*`); the class names are the folder names of `train`, sorted.
- Every other task reads a checked `data.yaml` (`yolo_orch.files.datasets`): `pose` needs
  `kpt_shape`; `semantic` reads class-index masks from `masks_dir` (or polygons from `labels`);
  `depth` reads depth maps from `depth/` beside `images/`; detect, segment and obb read `labels/`.
A dataset of another task (a detection data.yaml for a classify model, a pose dataset for a detect
model, no `kpt_shape` for a pose model) is `task_mismatch`: refused at submission, and again when
the job starts (the files may have changed since).

Blocking (it reads files): call it from a worker thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from yolo_orch.errors import ErrorCode, InvalidJob
from yolo_orch.files.class_names import DEFAULT_CLASS_NAME_LIMITS, ClassNameLimits
from yolo_orch.files.datasets import (
    Dataset,
    check_dataset,
    contained,
    lexists,
    load_dataset,
    real_roots,
)
from yolo_orch.files.inputs import check_relative
from yolo_orch.files.paths import client_path_errors

__all__ = ["TASKS", "ImageFolder", "TaskDataset", "check_task_dataset", "load_task_dataset"]

TASKS = ("detect", "segment", "semantic", "depth", "classify", "pose", "obb")
"""ultralytics' tasks (`ultralytics.cfg.TASKS`); this server trains and validates each."""
_SPLITS = ("train", "val", "test")
_SHAPES = {
    "segment": (7, "polygons (class x1 y1 x2 y2 x3 y3 ...)"),
    "obb": (9, "4 corners (class x1 y1 x2 y2 x3 y3 x4 y4)"),
}
"""Values a label line must have at least (an odd number: the class and x, y pairs)."""
_TARGETS = {"depth": "depth"}
"""Where a task's targets sit beside `images/`, when not in `labels/`."""


@dataclass(frozen=True)
class ImageFolder:
    """A classification dataset: one folder per split, one subfolder per class."""

    root: Path
    splits: dict[str, Path]
    names: tuple[str, ...]


TaskDataset = Dataset | ImageFolder


def check_task_dataset(
    task: str,
    relative: str,
    data_roots: Sequence[Path],
    limits: ClassNameLimits = DEFAULT_CLASS_NAME_LIMITS,
) -> tuple[Path, TaskDataset]:
    """Find `relative` under a data root and check that it is a dataset for `task`; return its
    real path (a data.yaml, or the folder for classify) and what it holds."""
    _check_task(task)
    if task != "classify":
        if _located(relative, data_roots).is_dir():
            raise InvalidJob(
                f"{relative!r} is a folder; a {task} model reads a data.yaml "
                "(image folders are for classify models)",
                code=ErrorCode.TASK_MISMATCH,
            )
        real = check_dataset(relative, data_roots, limits)
    else:
        real = _located(relative, data_roots)
    return real, load_task_dataset(task, real, data_roots, limits)


def load_task_dataset(
    task: str,
    path: Path,
    data_roots: Sequence[Path],
    limits: ClassNameLimits = DEFAULT_CLASS_NAME_LIMITS,
) -> TaskDataset:
    """The checked dataset at a real path, for a model of `task`."""
    _check_task(task)
    if task == "classify":
        if not path.is_dir():
            raise InvalidJob(
                f"{path.name} is a file; a classify model reads an image folder "
                "(root/train/<class>/..., root/val/<class>/...), not a data.yaml",
                code=ErrorCode.TASK_MISMATCH,
            )
        folder = _image_folder(path, data_roots)
        limits.check(folder.names, path.name)
        return folder
    dataset = load_dataset(path, data_roots, limits)
    _check_fits(task, dataset)
    return dataset


def _check_task(task: str) -> None:
    if task not in TASKS:
        raise InvalidJob(
            f"this server cannot train or validate {task!r} models (tasks: {', '.join(TASKS)})",
            code=ErrorCode.TASK_MISMATCH,
        )


def _located(relative: str, data_roots: Sequence[Path]) -> Path:
    check_relative(relative)
    roots = real_roots(data_roots)
    for root in roots:
        candidate = root / relative
        with client_path_errors(relative):
            if lexists(candidate):
                return contained(candidate, roots, relative)
    raise InvalidJob(f"{relative!r} is not under the data roots", code=ErrorCode.DATASET_NOT_FOUND)


def _image_folder(root: Path, data_roots: Sequence[Path]) -> ImageFolder:
    roots = real_roots(data_roots)
    root = contained(root, roots, root.name)
    splits: dict[str, Path] = {}
    classes: dict[str, set[str]] = {}
    for split in _SPLITS:
        folder = root / split
        if not lexists(folder):
            continue
        real = contained(folder, roots, f"{root.name}/{split}")
        if not real.is_dir():
            raise InvalidJob(f"{root.name}/{split} is not a folder", code=ErrorCode.INVALID_DATASET)
        splits[split] = real
        classes[split] = {
            entry.name
            for entry in real.iterdir()
            if entry.is_dir() and contained(entry, roots, f"{split}/{entry.name}").is_dir()
        }
    for split in ("train", "val"):
        if not classes.get(split):
            raise InvalidJob(
                f"{root.name}/{split} needs one folder of images per class",
                ErrorCode.DATASET_NOT_FOUND,
            )
    for split, found in classes.items():
        if not found <= classes["train"]:
            extra = ", ".join(sorted(found - classes["train"]))
            raise InvalidJob(
                f"{split} has classes that train has not: {extra}", ErrorCode.INVALID_DATASET
            )
    return ImageFolder(root=root, splits=splits, names=tuple(sorted(classes["train"])))


def _check_fits(task: str, dataset: Dataset) -> None:
    name = dataset.yaml_path.name
    keys = dataset.task_keys
    owners = {"kpt_shape": "pose", "masks_dir": "semantic", "depth_scale": "depth"}
    for key, owner in owners.items():
        if key in keys and task != owner:
            raise InvalidJob(
                f"{name} has {key!r}, which makes it a {owner} dataset; the model is {task}",
                code=ErrorCode.TASK_MISMATCH,
            )
    if task == "pose" and "kpt_shape" not in keys:
        raise InvalidJob(
            f"{name} has no kpt_shape; a pose model needs its keypoints",
            code=ErrorCode.TASK_MISMATCH,
        )
    # semantic without masks_dir reads polygons from labels/, which ultralytics rasterises
    targets = (
        keys.get("masks_dir", "labels") if task == "semantic" else _TARGETS.get(task, "labels")
    )
    for split, paths in dataset.splits.items():
        for path in paths:
            beside = _beside_images(path, targets)
            if beside is None:
                continue
            if not beside.is_dir():
                code = ErrorCode.TASK_MISMATCH if task == "depth" else ErrorCode.DATASET_NOT_FOUND
                raise InvalidJob(
                    f"{split} images at {_shown(path, dataset.root)} have no "
                    f"{_shown(beside, dataset.root)} folder for a {task} model",
                    code=code,
                )
            if task in _SHAPES and split == "train":
                _check_label_shape(task, beside, dataset.root)


def _check_label_shape(task: str, labels: Path, root: Path) -> None:
    """A glance at the first label file: boxes (5 values a line) cannot train masks or
    rotated boxes, which need polygons (`class x1 y1 x2 y2 x3 y3 ...`)."""
    first = next((f for f in sorted(labels.glob("*.txt")) if f.stat().st_size > 0), None)
    if first is None:
        return
    with first.open(encoding="utf-8", errors="replace") as f:
        values = len(f.readline(4096).split())
    minimum, what = _SHAPES[task]
    if values < minimum or values % 2 == 0:
        raise InvalidJob(
            f"{_shown(first, root)} has {values} values a line; a {task} model needs {what}",
            code=ErrorCode.TASK_MISMATCH,
        )


def _beside_images(path: Path, name: str) -> Path | None:
    """Where ultralytics looks for the targets of the images in folder `path`: the last
    `images` part of the path replaced by `name`; None when not knowable (list files, or no
    `images` part: then targets sit beside the images)."""
    if not path.is_dir() or "images" not in path.parts:
        return None
    parts = list(path.parts)
    index = len(parts) - 1 - parts[::-1].index("images")
    parts[index] = name
    return Path(*parts)


def _shown(path: Path, root: Path) -> str:
    return str(path.relative_to(root)) if path.is_relative_to(root) else path.name
