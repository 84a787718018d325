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
import hmac
import json
import secrets
import shutil
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from yolo_orch.domain.managed_datasets import (
    IMAGE_KEY,
    ITEM_SOURCES,
    MANAGED_TASKS,
    SPLITS,
    DatasetInfo,
    ItemInfo,
    SplitCounts,
    is_dataset_name,
    is_item_id,
    item_id,
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
from yolo_orch.files.managed_dataset_disk import (
    DATA_YAML,
    MANIFEST,
    StoredDataset,
    StoredItem,
    info_from,
    item_source,
    label_text,
    load_items,
    manifest_bytes,
    now_utc,
    public_item,
    read_lines,
    write_sidecar,
    write_skeleton,
)
from yolo_orch.files.managed_dataset_labels import (
    IMAGE_SUFFIXES,
    LabelsRefused,
    checked_labels,
    classes_of,
)

__all__ = ["ManagedDatasets"]
MAX_KEYPOINTS = 1000
_CLASS_FOLDER_CHARS = 100
_IMAGE_KEY_BYTES = 32


class ManagedDatasets:
    def __init__(self, root: Path, class_name_limits: ClassNameLimits | None = None) -> None:
        self.root = root
        self._limits = class_name_limits or DEFAULT_CLASS_NAME_LIMITS
        self._lock = threading.RLock()
        self._loaded: dict[str, StoredDataset] = {}

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
                write_skeleton(building, info)
                building.rename(folder)
            finally:
                shutil.rmtree(building, ignore_errors=True)
            self._loaded[name] = StoredDataset(folder, info)
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
        checked_source = item_source(source)
        suffix = suffix.lower() if suffix.startswith(".") else f".{suffix.lower()}"
        with self._lock:
            dataset = self._dataset(name)
            if suffix not in IMAGE_SUFFIXES:
                raise InvalidDatasetItem(name, f"images are stored as {_suffixes()}, not {suffix}")
            if not image:
                raise InvalidDatasetItem(name, "the image is empty")
            lines = self._checked(dataset, labels)
            now = now_utc()
            item = StoredItem(
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
                write_atomic(dataset.labels_path(item), label_text(lines), durable=False)
            write_sidecar(dataset, item)
            dataset.put(item)
            return item.id

    def set_labels(self, name: str, item: str, labels: Sequence[str], *, source: str) -> None:
        """Replace an item's labels (a classify item moves to its new class's folder)."""
        checked_source = item_source(source)
        with self._lock:
            dataset = self._dataset(name)
            found = self._item(dataset, item)
            lines = self._checked(dataset, labels)
            updated = replace(
                found, classes=classes_of(lines), source=checked_source, updated_at=now_utc()
            )
            if dataset.info.task == "classify":
                moved_to = dataset.image_path(updated)
                if moved_to != dataset.image_path(found):
                    moved_to.parent.mkdir(parents=True, exist_ok=True)
                    dataset.image_path(found).rename(moved_to)
            else:
                write_atomic(dataset.labels_path(updated), label_text(lines), durable=False)
            write_sidecar(dataset, updated)
            dataset.put(updated)

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
            return read_lines(dataset.labels_path(found))

    def items(self, name: str, source: str | None = None) -> builtins.list[ItemInfo]:
        """The dataset's items in the order they were added, of one source when given."""
        with self._lock:
            return [
                public_item(item)
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

    def files(self, name: str) -> tuple[Path, builtins.list[Path]]:
        """The dataset's folder, and its files now (what a zip download holds): a file may
        be gone by the time it is read (a classify item moved to another class)."""
        with self._lock:
            dataset = self._dataset(name)
            return dataset.folder, dataset.files()

    def update_labelling(self, name: str, changes: Mapping[str, Any]) -> DatasetInfo:
        """Merge `changes` into the manifest's `labelling` (a key set to None is removed)."""
        with self._lock:
            dataset = self._dataset(name)
            self._write_labelling(dataset, changes)
            return dataset.counted()

    def image_key(self, name: str) -> str:
        """The key that opens the dataset's item images without a token (`?key=`), made on
        first use and kept in its manifest."""
        with self._lock:
            dataset = self._dataset(name)
            key = dataset.info.labelling.get(IMAGE_KEY)
            if not isinstance(key, str) or len(key) < _IMAGE_KEY_BYTES:
                key = secrets.token_urlsafe(_IMAGE_KEY_BYTES)
                self._write_labelling(dataset, {IMAGE_KEY: key})
            return key

    def opens_images(self, name: str, key: str) -> bool:
        """Whether `key` is the dataset's image key; False for a dataset that does not exist
        (a wrong key learns nothing of which names do)."""
        with self._lock:
            try:
                stored = self._dataset(name).info.labelling.get(IMAGE_KEY)
            except DatasetNotFound:
                return False
        return isinstance(stored, str) and hmac.compare_digest(stored.encode(), key.encode())

    def _write_labelling(self, dataset: StoredDataset, changes: Mapping[str, Any]) -> None:
        labelling = {**dataset.info.labelling, **changes}
        labelling = {key: value for key, value in labelling.items() if value is not None}
        info = replace(dataset.info, labelling=_json_object(labelling))
        write_atomic(dataset.folder / MANIFEST, manifest_bytes(info))
        dataset.set_info(info)

    def _dataset(self, name: str) -> StoredDataset:
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
        dataset = StoredDataset(folder, info_from(manifest))
        load_items(dataset)
        self._loaded[name] = dataset
        return dataset

    def _item(self, dataset: StoredDataset, item: str) -> StoredItem:
        found = dataset.items.get(item) if is_item_id(item) else None
        if found is None:
            raise DatasetItemNotFound(dataset.info.name, item)
        return found

    def _checked(self, dataset: StoredDataset, labels: Sequence[str]) -> builtins.list[str]:
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
        created_at=now_utc(),
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


def _suffixes() -> str:
    return ", ".join(sorted(IMAGE_SUFFIXES))
