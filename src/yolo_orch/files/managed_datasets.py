"""Managed datasets: folders the server writes under its datasets dir (`datasets_dir`, under a
data root), which capture fills, Label Studio annotates and training jobs read by name
(`dataset: "dataset:<name>"`). docs/datasets.md describes the layout:

    <name>/dataset.json                       name, task, names, kpt_shape, created_at, labelling
    <name>/data.yaml                          path/train/val/names (+kpt_shape); not for classify
    <name>/images/{train,val}/<item><suffix>  <name>/labels/{train,val}/<item>.txt
    <name>/{train,val}/<class name>/<item><suffix>   (classify: the class is the folder)
    <name>/items/<item>.json                  source, model_id, job_id, created_at, updated_at

An item's sidecar is written last: an image or label file without one (a crash between the
writes) is not an item. Thread-safe within one process: capture adds from its writer thread
while requests read. Each dataset's items and counts are read from disk once, then kept in
memory and updated by every write through this class. Blocking: call it from a worker thread.
"""

from __future__ import annotations

import builtins
import json
import secrets
import shutil
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from yolo_orch.domain.managed_datasets import (
    ITEM_SOURCES,
    MANAGED_TASKS,
    SPLITS,
    DatasetInfo,
    ItemInfo,
    ItemSource,
    SplitCounts,
    is_dataset_name,
    is_item_id,
    item_id,
    split_of,
)
from yolo_orch.errors import (
    DatasetExists,
    DatasetItemNotFound,
    DatasetNotFound,
    ErrorCode,
    InvalidDatasetItem,
    InvalidJob,
)
from yolo_orch.files.class_names import DEFAULT_CLASS_NAME_LIMITS, ClassNameLimits
from yolo_orch.files.jobfiles import write_atomic
from yolo_orch.files.managed_dataset_labels import (
    IMAGE_SUFFIXES,
    LabelsRefused,
    checked_labels,
    classes_of,
)

__all__ = ["ManagedDatasets"]

MANIFEST = "dataset.json"
DATA_YAML = "data.yaml"
ITEMS_DIR = "items"
MAX_KEYPOINTS = 1000
_CLASS_FOLDER_CHARS = 100


@dataclass
class _Item:
    id: str
    suffix: str
    source: ItemSource
    model_id: str | None
    job_id: str | None
    created_at: datetime
    updated_at: datetime
    classes: list[int]

    @property
    def split(self) -> str:
        return split_of(self.id)

    def sidecar(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "suffix": self.suffix,
            "source": self.source,
            "model_id": self.model_id,
            "job_id": self.job_id,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


@dataclass
class _Dataset:
    """One dataset as kept in memory: its manifest and its items."""

    folder: Path
    info: DatasetInfo
    items: dict[str, _Item] = field(default_factory=dict)
    next_sequence: int = 0

    def image_path(self, item: _Item) -> Path:
        if self.info.task == "classify":
            class_name = self.info.names[item.classes[0]]
            return self.folder / item.split / class_name / f"{item.id}{item.suffix}"
        return self.folder / "images" / item.split / f"{item.id}{item.suffix}"

    def labels_path(self, item: _Item) -> Path:
        return self.folder / "labels" / item.split / f"{item.id}.txt"

    def counted(self) -> DatasetInfo:
        instances: dict[str, dict[str, int]] = {split: {} for split in SPLITS}
        images = dict.fromkeys(SPLITS, 0)
        sources: dict[str, int] = dict.fromkeys(ITEM_SOURCES, 0)
        for item in self.items.values():
            images[item.split] += 1
            sources[item.source] += 1
            per_class = instances[item.split]
            for class_id in item.classes:
                name = self.info.names[class_id]
                per_class[name] = per_class.get(name, 0) + 1
        splits = {split: SplitCounts(images[split], instances[split]) for split in SPLITS}
        return replace(self.info, splits=splits, sources=sources)


class ManagedDatasets:
    def __init__(self, root: Path, class_name_limits: ClassNameLimits | None = None) -> None:
        self.root = root
        self._limits = class_name_limits or DEFAULT_CLASS_NAME_LIMITS
        self._lock = threading.RLock()
        self._loaded: dict[str, _Dataset] = {}

    def create(
        self,
        name: str,
        task: str,
        names: Sequence[str],
        kpt_shape: tuple[int, int] | None = None,
        labelling: Mapping[str, Any] | None = None,
    ) -> DatasetInfo:
        """A new empty dataset; `DatasetExists` if the name is taken. Its folder is built
        under a temporary name and renamed: a reader never sees half of it."""
        info = _new_info(name, task, names, kpt_shape, labelling, self._limits)
        with self._lock:
            folder = self.root / name
            if folder.exists():
                raise DatasetExists(name)
            self.root.mkdir(parents=True, exist_ok=True)
            building = self.root / f".creating-{name}-{secrets.token_hex(4)}"
            try:
                _write_skeleton(building, info)
                building.rename(folder)
            finally:
                shutil.rmtree(building, ignore_errors=True)
            self._loaded[name] = _Dataset(folder, info)
            return self._loaded[name].counted()

    def get(self, name: str) -> DatasetInfo:
        with self._lock:
            return self._dataset(name).counted()

    def list(self) -> builtins.list[DatasetInfo]:
        with self._lock:
            if not self.root.is_dir():
                return []
            found = []
            for folder in sorted(self.root.iterdir()):
                if is_dataset_name(folder.name) and (folder / MANIFEST).is_file():
                    found.append(self._dataset(folder.name).counted())
            return found

    def delete(self, name: str) -> None:
        """The dataset and its files. Renamed away first, so that it is gone at once for
        every reader; the files are removed after, outside the lock."""
        with self._lock:
            folder = self._dataset(name).folder
            doomed = self.root / f".deleting-{name}-{secrets.token_hex(4)}"
            folder.rename(doomed)
            del self._loaded[name]
        shutil.rmtree(doomed, ignore_errors=True)

    def add(
        self,
        name: str,
        image: bytes,
        suffix: str,
        labels: Sequence[str],
        *,
        source: str,
        model_id: str | None = None,
        job_id: str | None = None,
    ) -> str:
        """Store an image (encoded bytes) with its YOLO label lines; returns the item's id.
        The item's split follows from its id (`split_of`)."""
        checked_source = _source(source)
        suffix = suffix.lower() if suffix.startswith(".") else f".{suffix.lower()}"
        with self._lock:
            dataset = self._dataset(name)
            if suffix not in IMAGE_SUFFIXES:
                raise InvalidDatasetItem(name, f"images are stored as {_suffixes()}, not {suffix}")
            if not image:
                raise InvalidDatasetItem(name, "the image is empty")
            lines = self._checked(dataset, labels)
            now = _now()
            item = _Item(
                id=item_id(dataset.next_sequence, secrets.token_hex(3)),
                suffix=suffix,
                source=checked_source,
                model_id=model_id,
                job_id=job_id,
                created_at=now,
                updated_at=now,
                classes=classes_of(lines),
            )
            dataset.next_sequence += 1
            write_atomic(dataset.image_path(item), image, durable=False)
            if dataset.info.task != "classify":
                write_atomic(dataset.labels_path(item), _text(lines), durable=False)
            _write_sidecar(dataset, item)
            dataset.items[item.id] = item
            return item.id

    def set_labels(self, name: str, item: str, labels: Sequence[str], *, source: str) -> None:
        """Replace an item's labels (a classify item moves to its new class's folder)."""
        checked_source = _source(source)
        with self._lock:
            dataset = self._dataset(name)
            found = self._item(dataset, item)
            lines = self._checked(dataset, labels)
            updated = replace(
                found, classes=classes_of(lines), source=checked_source, updated_at=_now()
            )
            if dataset.info.task == "classify":
                moved_to = dataset.image_path(updated)
                if moved_to != dataset.image_path(found):
                    moved_to.parent.mkdir(parents=True, exist_ok=True)
                    dataset.image_path(found).rename(moved_to)
            else:
                write_atomic(dataset.labels_path(updated), _text(lines), durable=False)
            _write_sidecar(dataset, updated)
            dataset.items[item] = updated

    def item_image(self, name: str, item: str) -> Path:
        with self._lock:
            dataset = self._dataset(name)
            return dataset.image_path(self._item(dataset, item))

    def item_labels(self, name: str, item: str) -> builtins.list[str]:
        """The item's label lines; for classify one line, its class id."""
        with self._lock:
            dataset = self._dataset(name)
            found = self._item(dataset, item)
            if dataset.info.task == "classify":
                return [str(found.classes[0])]
            return _read_lines(dataset.labels_path(found))

    def items(self, name: str, source: str | None = None) -> builtins.list[ItemInfo]:
        """The dataset's items in the order they were added, of one source when given."""
        with self._lock:
            return [
                _public(item)
                for item in self._dataset(name).items.values()
                if source is None or item.source == source
            ]

    def data_yaml(self, name: str) -> Path:
        """What a training job reads: the data.yaml, or for classify the dataset's folder
        (ultralytics reads its `train/<class>/` and `val/<class>/` folders)."""
        with self._lock:
            dataset = self._dataset(name)
            if dataset.info.task == "classify":
                return dataset.folder
            return dataset.folder / DATA_YAML

    def folder(self, name: str) -> Path:
        """The dataset's folder (what a zip download holds)."""
        with self._lock:
            return self._dataset(name).folder

    def update_labelling(self, name: str, changes: Mapping[str, Any]) -> DatasetInfo:
        """Merge `changes` into the manifest's `labelling` (a key set to None is removed)."""
        with self._lock:
            dataset = self._dataset(name)
            labelling = {**dataset.info.labelling, **changes}
            labelling = {key: value for key, value in labelling.items() if value is not None}
            info = replace(dataset.info, labelling=_json_object(labelling))
            write_atomic(dataset.folder / MANIFEST, _manifest(info))
            dataset.info = info
            return dataset.counted()

    def _dataset(self, name: str) -> _Dataset:
        """The dataset as kept in memory, read from disk on first use."""
        loaded = self._loaded.get(name)
        if loaded is not None:
            return loaded
        if not is_dataset_name(name):
            raise DatasetNotFound(name)
        folder = self.root / name
        try:
            manifest = json.loads((folder / MANIFEST).read_bytes())
        except (FileNotFoundError, NotADirectoryError):
            raise DatasetNotFound(name) from None
        dataset = _Dataset(folder, _info_from(manifest))
        _load_items(dataset)
        self._loaded[name] = dataset
        return dataset

    def _item(self, dataset: _Dataset, item: str) -> _Item:
        found = dataset.items.get(item) if is_item_id(item) else None
        if found is None:
            raise DatasetItemNotFound(dataset.info.name, item)
        return found

    def _checked(self, dataset: _Dataset, labels: Sequence[str]) -> builtins.list[str]:
        info = dataset.info
        try:
            return checked_labels(info.task, len(info.names), info.kpt_shape, labels)
        except LabelsRefused as e:
            raise InvalidDatasetItem(info.name, str(e)) from None


def _new_info(
    name: str,
    task: str,
    names: Sequence[str],
    kpt_shape: tuple[int, int] | None,
    labelling: Mapping[str, Any] | None,
    limits: ClassNameLimits,
) -> DatasetInfo:
    def refuse(why: str) -> InvalidJob:
        return InvalidJob(why, code=ErrorCode.INVALID_REQUEST)

    if not is_dataset_name(name):
        raise refuse(f"{name[:80]!r} is not a dataset name (a-z, 0-9, _ and -, up to 64)")
    if task not in MANAGED_TASKS:
        raise refuse(f"task must be one of {', '.join(MANAGED_TASKS)}")
    if not names or not all(isinstance(n, str) and n for n in names):
        raise refuse("names must be a non-empty list of class names")
    if len(set(names)) != len(names):
        raise refuse("names must not repeat")
    limits.check(names, f"dataset {name!r}")
    if task == "classify" and not all(_is_folder_name(n) for n in names):
        raise refuse(
            "a classify dataset's class names are folder names: no '/', '\\', NUL or leading "
            f"'.', up to {_CLASS_FOLDER_CHARS} characters"
        )
    if (task == "pose") != (kpt_shape is not None):
        raise refuse("kpt_shape is given for pose datasets, and only for them")
    if kpt_shape is not None:
        points, dims = kpt_shape
        if not 1 <= points <= MAX_KEYPOINTS or dims not in (2, 3):
            raise refuse(f"kpt_shape must be [keypoints 1..{MAX_KEYPOINTS}, 2 or 3]")
        kpt_shape = (int(points), int(dims))
    return DatasetInfo(
        name=name,
        task=task,
        names=tuple(names),
        kpt_shape=kpt_shape,
        created_at=_now(),
        labelling=_json_object(dict(labelling or {})),
        splits={split: SplitCounts() for split in SPLITS},
        sources=dict.fromkeys(ITEM_SOURCES, 0),
    )


def _is_folder_name(name: str) -> bool:
    return (
        len(name) <= _CLASS_FOLDER_CHARS
        and not name.startswith(".")
        and not any(c in name for c in "/\\\x00")
    )


def _json_object(value: dict[str, Any]) -> dict[str, Any]:
    """`value` as JSON will give it back (the manifest keeps it so); refused if not JSON."""
    try:
        loaded: dict[str, Any] = json.loads(json.dumps(value))
    except (TypeError, ValueError) as e:
        raise InvalidJob(f"labelling must be JSON: {e}", code=ErrorCode.INVALID_REQUEST) from e
    return loaded


def _write_skeleton(folder: Path, info: DatasetInfo) -> None:
    for split in SPLITS:
        if info.task == "classify":
            (folder / split).mkdir(parents=True)
        else:
            (folder / "images" / split).mkdir(parents=True)
            (folder / "labels" / split).mkdir(parents=True)
    (folder / ITEMS_DIR).mkdir()
    write_atomic(folder / MANIFEST, _manifest(info))
    if info.task != "classify":
        data: dict[str, Any] = {
            "path": ".",
            "train": "images/train",
            "val": "images/val",
            "names": dict(enumerate(info.names)),
        }
        if info.kpt_shape is not None:
            data["kpt_shape"] = list(info.kpt_shape)
        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
        write_atomic(folder / DATA_YAML, text.encode("utf-8"))


def _manifest(info: DatasetInfo) -> bytes:
    manifest = {
        "name": info.name,
        "task": info.task,
        "names": list(info.names),
        "kpt_shape": None if info.kpt_shape is None else list(info.kpt_shape),
        "created_at": info.created_at.isoformat(),
        "labelling": info.labelling,
    }
    return json.dumps(manifest, indent=2, ensure_ascii=False).encode("utf-8")


def _info_from(manifest: dict[str, Any]) -> DatasetInfo:
    shape = manifest.get("kpt_shape")
    return DatasetInfo(
        name=manifest["name"],
        task=manifest["task"],
        names=tuple(manifest["names"]),
        kpt_shape=None if shape is None else (int(shape[0]), int(shape[1])),
        created_at=datetime.fromisoformat(manifest["created_at"]),
        labelling=dict(manifest.get("labelling") or {}),
        splits={split: SplitCounts() for split in SPLITS},
        sources=dict.fromkeys(ITEM_SOURCES, 0),
    )


def _load_items(dataset: _Dataset) -> None:
    """Read every item's sidecar, and its labels (classify: the class folder its image is
    in), once; the next id continues after the highest sequence number found."""
    task, names = dataset.info.task, dataset.info.names
    for sidecar in sorted((dataset.folder / ITEMS_DIR).glob("*.json")):
        try:
            entry = json.loads(sidecar.read_bytes())
        except (OSError, ValueError):
            continue  # a torn sidecar (never written whole): not an item
        item = _Item(
            id=entry["id"],
            suffix=entry["suffix"],
            source=_source(entry["source"]),
            model_id=entry.get("model_id"),
            job_id=entry.get("job_id"),
            created_at=datetime.fromisoformat(entry["created_at"]),
            updated_at=datetime.fromisoformat(entry["updated_at"]),
            classes=[],
        )
        if task == "classify":
            folders = dataset.folder / item.split
            where = next(
                (
                    i
                    for i, n in enumerate(names)
                    if (folders / n / f"{item.id}{item.suffix}").is_file()
                ),
                None,
            )
            if where is None:
                continue
            item.classes = [where]
        else:
            item.classes = classes_of(_read_lines(dataset.labels_path(item)))
        dataset.items[item.id] = item
        sequence = int(item.id.partition("-")[0])
        dataset.next_sequence = max(dataset.next_sequence, sequence + 1)


def _write_sidecar(dataset: _Dataset, item: _Item) -> None:
    data = json.dumps(item.sidecar()).encode("utf-8")
    write_atomic(dataset.folder / ITEMS_DIR / f"{item.id}.json", data, durable=False)


def _read_lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [line.strip() for line in text.splitlines() if line.strip()]


def _public(item: _Item) -> ItemInfo:
    return ItemInfo(
        id=item.id,
        split=item.split,
        source=item.source,
        model_id=item.model_id,
        job_id=item.job_id,
        created_at=item.created_at,
        updated_at=item.updated_at,
        instances=len(item.classes),
    )


def _source(source: str) -> ItemSource:
    for known in ITEM_SOURCES:
        if source == known:
            return known
    raise ValueError(f"source must be one of {', '.join(ITEM_SOURCES)}, not {source!r}")


def _text(lines: Sequence[str]) -> bytes:
    return "".join(f"{line}\n" for line in lines).encode("utf-8")


def _suffixes() -> str:
    return ", ".join(sorted(IMAGE_SUFFIXES))


def _now() -> datetime:
    return datetime.now(UTC)
