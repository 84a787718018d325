"""Checking a client's detection `data.yaml` before ultralytics ever reads it.

ultralytics acts on a data.yaml in ways a server cannot allow (`data/utils.py` `check_det_dataset`):
- `download:` runs when a split is missing: a URL is fetched, `bash ...` is run, anything else is
  `exec()`'d as Python. Refused outright (`unsafe_dataset`), whatever the paths look like.
- `path:` that does not exist is looked up under ultralytics' datasets folder; relative
  `train`/`val` entries starting with `../` are retried without it; list files (`train: x.txt`)
  may name images by absolute path, or relative to the process's working directory.
- `masks_dir`, `label_mapping`, `bg_class_idx`, `depth_scale`, `kpt_shape`, `minival`, ... switch
  dataset classes and behaviour meant for other tasks. A few of them are what makes a dataset one
  task's (pose, semantic, depth): those are checked and carried (`Dataset.task_keys`), the rest
  dropped; `yolo_orch.files.task_data` checks that a dataset fits a model's task.

So the rules: the yaml, its `path`, every `train`/`val`/`test` entry, and every image a list file
names must resolve (symlinks followed) inside the data roots; `names` is required; and the runner
never hands the client's file to ultralytics: it writes `Dataset.for_ultralytics()`, which carries
only `path`, `train`, `val`, `test`, `names`, `nc`, `channels` and the checked task keys, as
absolute paths. Other keys
are ignored (exports add metadata such as `roboflow:`). Not checked: files inside the image folders
(ultralytics globs them; a symlink placed there by someone who can write to a data root is
followed), and ultralytics writes a `labels.cache` next to each labels folder when it can.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from yolo_orch.errors import ErrorCode, InvalidJob, PathOutsideRoots, no_data_roots
from yolo_orch.files import safe_yaml
from yolo_orch.files.class_names import DEFAULT_CLASS_NAME_LIMITS, ClassNameLimits, in_id_order
from yolo_orch.files.inputs import check_relative
from yolo_orch.files.paths import client_path_errors, real_path
from yolo_orch.files.shown_paths import ShownPaths

__all__ = ["Dataset", "check_dataset", "load_dataset"]

MAX_YAML_BYTES = 1 << 20
YAML_NODES_BESIDES_NAMES = 1_000
"""Values a data.yaml may hold besides its class names (a names mapping holds two per class)."""
_SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class Dataset:
    yaml_path: Path
    root: Path
    splits: dict[str, tuple[Path, ...]]
    """`train`, `val` and, when given, `test`: real paths of folders or image-list files."""
    names: tuple[str, ...]
    channels: int
    task_keys: dict[str, Any] = field(default_factory=dict)
    """Checked keys that make it a dataset of one task: `kpt_shape` (with `flip_idx`,
    `kpt_names`) for pose, `masks_dir` for semantic, `depth_scale` and `max_depth` for depth."""

    def for_ultralytics(self) -> dict[str, Any]:
        """The only mapping ultralytics gets: absolute paths, nothing it could act on."""
        data: dict[str, Any] = {
            "path": str(self.root),
            "names": dict(enumerate(self.names)),
            "nc": len(self.names),
            "channels": self.channels,
        }
        data.update({split: [str(p) for p in paths] for split, paths in self.splits.items()})
        data.update(self.task_keys)
        return data


def check_dataset(
    relative: str, data_roots: Sequence[Path], limits: ClassNameLimits = DEFAULT_CLASS_NAME_LIMITS
) -> Path:
    """Find `relative` (a data.yaml) under a data root, check it, and return its real path.

    Blocking (it reads files): call it from a worker thread.
    """
    check_relative(relative)
    roots = real_roots(data_roots)
    for root in roots:
        candidate = root / relative
        with client_path_errors(relative):
            if not lexists(candidate):
                continue
            real = contained(candidate, roots, relative)
            if not real.is_file():
                raise InvalidJob(f"{relative!r} is not a file", code=ErrorCode.DATASET_NOT_FOUND)
        load_dataset(real, data_roots, limits)
        return real
    raise InvalidJob(f"{relative!r} is not under the data roots", code=ErrorCode.DATASET_NOT_FOUND)


def load_dataset(
    yaml_path: Path, data_roots: Sequence[Path], limits: ClassNameLimits = DEFAULT_CLASS_NAME_LIMITS
) -> Dataset:
    """Parse and check a data.yaml at a real path (again at run time: the file may have changed)."""
    roots = real_roots(data_roots)
    shown = ShownPaths(roots)
    real = contained(yaml_path, roots, shown.text(str(yaml_path)))
    if real.suffix.lower() not in {".yaml", ".yml"}:
        raise InvalidJob(
            f"{real.name} must be a .yaml or .yml file", code=ErrorCode.INVALID_DATASET
        )
    try:
        if real.stat().st_size > MAX_YAML_BYTES:
            raise InvalidJob(
                f"{real.name} is larger than {MAX_YAML_BYTES} bytes", ErrorCode.INVALID_DATASET
            )
        max_nodes = 2 * limits.max_names + YAML_NODES_BESIDES_NAMES
        data = safe_yaml.load_file(real, max_bytes=MAX_YAML_BYTES, max_nodes=max_nodes)
    except FileNotFoundError:
        raise InvalidJob(
            f"{real.name} no longer exists", code=ErrorCode.DATASET_NOT_FOUND
        ) from None
    except safe_yaml.YamlRefused as e:
        raise InvalidJob(f"{real.name} is refused: {e}", code=ErrorCode.INVALID_DATASET) from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise InvalidJob(
            f"{real.name} is not readable YAML: {shown.text(str(e))}",
            code=ErrorCode.INVALID_DATASET,
        ) from e
    if not isinstance(data, dict):
        raise InvalidJob(f"{real.name} must hold a YAML mapping", code=ErrorCode.INVALID_DATASET)
    if "download" in data:
        raise InvalidJob(
            f"{real.name} has a 'download' key; ultralytics would fetch or execute it, so datasets "
            "must be complete on disk and carry no 'download'",
            code=ErrorCode.UNSAFE_DATASET,
        )
    names = _names(data.get("names"), real.name, limits)
    nc = data.get("nc")
    if nc is not None and nc != len(names):
        raise InvalidJob(
            f"nc is {nc!r} but names has {len(names)} entries", ErrorCode.INVALID_DATASET
        )
    channels = data.get("channels", 3)
    if channels not in (1, 3) or isinstance(channels, bool):
        raise InvalidJob("channels must be 1 or 3", code=ErrorCode.INVALID_DATASET)
    root = _dataset_root(data.get("path"), real, roots)
    splits: dict[str, tuple[Path, ...]] = {}
    for split in _SPLITS:
        value = data.get(split)
        if value is None and split == "test":
            continue
        splits[split] = tuple(
            _split_path(entry, split, root, roots) for entry in _entries(value, split)
        )
    return Dataset(
        yaml_path=real,
        root=root,
        splits=splits,
        names=names,
        channels=channels,
        task_keys=_task_keys(data, real.name),
    )


_FOLDER_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")
MAX_KEYPOINTS = 1000


def _task_keys(data: dict[Any, Any], file: str) -> dict[str, Any]:
    keys: dict[str, Any] = {}
    if "kpt_shape" in data:
        keys.update(_keypoint_keys(data, file))
    masks_dir = data.get("masks_dir")
    if masks_dir is not None:
        # ultralytics swaps it for the `images` folder name in each image path: a name, not a path
        if not isinstance(masks_dir, str) or not _FOLDER_NAME.fullmatch(masks_dir):
            raise InvalidJob(f"{file}: masks_dir must be a folder name", ErrorCode.INVALID_DATASET)
        keys["masks_dir"] = masks_dir
    for key in ("depth_scale", "max_depth"):
        value = data.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise InvalidJob(f"{file}: {key} must be a positive number", ErrorCode.INVALID_DATASET)
        if not math.isfinite(value):
            raise InvalidJob(f"{file}: {key} must be finite", ErrorCode.INVALID_DATASET)
        keys[key] = value
    return keys


def _keypoint_keys(data: dict[Any, Any], file: str) -> dict[str, Any]:
    shape = data["kpt_shape"]
    if not (
        isinstance(shape, list)
        and len(shape) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in shape)
        and 1 <= shape[0] <= MAX_KEYPOINTS
        and shape[1] in (2, 3)
    ):
        raise InvalidJob(
            f"{file}: kpt_shape must be [keypoints, 2 or 3] (at most {MAX_KEYPOINTS} keypoints)",
            ErrorCode.INVALID_DATASET,
        )
    keys: dict[str, Any] = {"kpt_shape": shape}
    flip = data.get("flip_idx")
    if flip is not None:
        if not isinstance(flip, list) or sorted(flip) != list(range(shape[0])):
            raise InvalidJob(
                f"{file}: flip_idx must be a permutation of 0..{shape[0] - 1}",
                ErrorCode.INVALID_DATASET,
            )
        keys["flip_idx"] = flip
    names = data.get("kpt_names")
    if names is not None:
        if not isinstance(names, dict) or not all(
            isinstance(v, list) and len(v) == shape[0] and all(isinstance(n, str) for n in v)
            for v in names.values()
        ):
            raise InvalidJob(
                f"{file}: kpt_names must map class ids to {shape[0]} keypoint names",
                ErrorCode.INVALID_DATASET,
            )
        keys["kpt_names"] = names
    return keys


def real_roots(data_roots: Sequence[Path]) -> list[Path]:
    if not data_roots:
        raise no_data_roots()
    return [Path(os.path.realpath(root)) for root in data_roots]


def lexists(path: Path) -> bool:
    try:
        os.lstat(path)
    except FileNotFoundError:
        return False
    return True


def contained(path: Path, roots: Sequence[Path], shown: str) -> Path:
    real = Path(real_path(path, shown))
    if not any(real.is_relative_to(root) for root in roots):
        raise PathOutsideRoots(shown, "it leads outside the data roots")
    return real


def _names(value: object, file: str, limits: ClassNameLimits) -> tuple[str, ...]:
    if isinstance(value, list) and value and all(isinstance(n, str) for n in value):
        names: list[str] = value
    elif isinstance(value, dict) and value and all(isinstance(n, str) for n in value.values()):
        ordered = in_id_order(value)
        if ordered is None:
            raise InvalidJob(
                f"{file}: names must map class ids 0..n-1 to strings", ErrorCode.INVALID_DATASET
            )
        names = [str(name) for name in ordered]
    else:
        raise InvalidJob(
            f"{file} needs 'names': a non-empty list of strings, or a mapping of class id to name",
            code=ErrorCode.INVALID_DATASET,
        )
    limits.check(names, file)
    return tuple(names)


def _dataset_root(value: object, yaml_path: Path, roots: Sequence[Path]) -> Path:
    if value is None:
        return yaml_path.parent
    if not isinstance(value, str) or not value:
        raise InvalidJob("path must be a folder name", code=ErrorCode.INVALID_DATASET)
    with client_path_errors(value):
        root = contained(yaml_path.parent / value, roots, value)  # an absolute value replaces it
        if not root.is_dir():
            raise InvalidJob(f"path {value!r} is not a folder", code=ErrorCode.DATASET_NOT_FOUND)
    return root


def _entries(value: object, split: str) -> list[str]:
    if isinstance(value, str) and value:
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return value
    raise InvalidJob(
        f"{split} must be a path or a non-empty list of paths", ErrorCode.INVALID_DATASET
    )


def _split_path(entry: str, split: str, root: Path, roots: Sequence[Path]) -> Path:
    with client_path_errors(entry):
        real = contained(root / entry, roots, entry)
        if real.is_dir():
            return real
        if not real.is_file():
            raise InvalidJob(
                f"{split} entry {entry!r} does not exist", code=ErrorCode.DATASET_NOT_FOUND
            )
    _check_image_list(real, entry, roots)
    return real


def _check_image_list(list_file: Path, shown: str, roots: Sequence[Path]) -> None:
    """A list file names one image a line: `./x` relative to its folder (ultralytics' rule), or
    absolute. Other relative lines would be read relative to the server's working directory."""
    try:
        with list_file.open(encoding="utf-8") as f:
            for number, raw in enumerate(f, start=1):
                line = raw.strip()
                if not line:
                    continue
                if line.startswith("./"):
                    image = list_file.parent / line[2:]
                elif os.path.isabs(line):
                    image = Path(line)
                else:
                    raise InvalidJob(
                        f"{shown} line {number}: image paths must be absolute or start with './'",
                        code=ErrorCode.INVALID_DATASET,
                    )
                contained(image, roots, f"{shown} line {number}")
    except (OSError, UnicodeDecodeError) as e:
        reason = ShownPaths(roots).text(str(e))
        raise InvalidJob(
            f"{shown} is not a readable image list: {reason}", ErrorCode.INVALID_DATASET
        ) from e
