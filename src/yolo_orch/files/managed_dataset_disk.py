"""The files of one managed dataset (layout in `yolo_orch.files.managed_datasets`): its folder
made whole before it is renamed into place, its manifest, each item's sidecar, and reading them
back once into memory (`StoredDataset`). Blocking, and unlocked: `ManagedDatasets` holds its
lock around every call."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from yolo_orch.domain.managed_datasets import (
    ITEM_SOURCES,
    SPLITS,
    DatasetInfo,
    ItemInfo,
    ItemSource,
    SplitCounts,
    is_item_id,
    split_of,
)
from yolo_orch.files.jobfiles import write_atomic
from yolo_orch.files.managed_dataset_labels import classes_of

MANIFEST = "dataset.json"
DATA_YAML = "data.yaml"
ITEMS_DIR = "items"


@dataclass
class StoredItem:
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
class StoredDataset:
    """One dataset as kept in memory: its manifest and its items. Its counts are made once
    after each write (`put`, `set_info`): reads between writes get them as they are."""

    folder: Path
    info: DatasetInfo
    items: dict[str, StoredItem] = field(default_factory=dict)
    next_sequence: int = 0
    _counts: DatasetInfo | None = None

    def put(self, item: StoredItem) -> None:
        """Keep a new or changed item."""
        self.items[item.id] = item
        self._counts = None

    def set_info(self, info: DatasetInfo) -> None:
        """Keep a changed manifest (its `labelling`)."""
        self.info = info
        self._counts = None

    def image_path(self, item: StoredItem) -> Path:
        if self.info.task == "classify":
            class_name = self.info.names[item.classes[0]]
            return self.folder / item.split / class_name / f"{item.id}{item.suffix}"
        return self.folder / "images" / item.split / f"{item.id}{item.suffix}"

    def labels_path(self, item: StoredItem) -> Path:
        return self.folder / "labels" / item.split / f"{item.id}.txt"

    def files(self) -> list[Path]:
        """Every file of the dataset: its manifest and data.yaml, and each item's image,
        labels and sidecar (not what else lies in its folder, such as ultralytics' caches)."""
        classify = self.info.task == "classify"
        files = [self.folder / MANIFEST, *([] if classify else [self.folder / DATA_YAML])]
        for item in self.items.values():
            files.append(self.image_path(item))
            if not classify:
                files.append(self.labels_path(item))
            files.append(self.folder / ITEMS_DIR / f"{item.id}.json")
        return files

    def counted(self) -> DatasetInfo:
        """The dataset with its counts, and a `labelling` of its own for the caller."""
        if self._counts is None:
            self._counts = self._count()
        return replace(self._counts, labelling=copy.deepcopy(self._counts.labelling))

    def _count(self) -> DatasetInfo:
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


def write_skeleton(folder: Path, info: DatasetInfo) -> None:
    for split in SPLITS:
        if info.task == "classify":
            (folder / split).mkdir(parents=True)
        else:
            (folder / "images" / split).mkdir(parents=True)
            (folder / "labels" / split).mkdir(parents=True)
    (folder / ITEMS_DIR).mkdir()
    write_atomic(folder / MANIFEST, manifest_bytes(info))
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


def manifest_bytes(info: DatasetInfo) -> bytes:
    manifest = {
        "name": info.name,
        "task": info.task,
        "names": list(info.names),
        "kpt_shape": None if info.kpt_shape is None else list(info.kpt_shape),
        "created_at": info.created_at.isoformat(),
        "labelling": info.labelling,
    }
    return json.dumps(manifest, indent=2, ensure_ascii=False).encode("utf-8")


def info_from(manifest: dict[str, Any]) -> DatasetInfo:
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


def load_items(dataset: StoredDataset) -> None:
    """Read every item's sidecar, and its labels (classify: the class folder its image is
    in), once; the next id continues after the highest sequence number found."""
    classify = dataset.info.task == "classify"
    class_of = _classify_folders(dataset) if classify else {}
    sidecars = [p for p in (dataset.folder / ITEMS_DIR).glob("*.json") if is_item_id(p.stem)]
    for sidecar in sorted(sidecars, key=lambda p: int(p.stem.partition("-")[0])):
        try:
            entry = json.loads(sidecar.read_bytes())
            item = StoredItem(
                id=sidecar.stem,
                suffix=entry["suffix"],
                source=item_source(entry["source"]),
                model_id=entry.get("model_id"),
                job_id=entry.get("job_id"),
                created_at=datetime.fromisoformat(entry["created_at"]),
                updated_at=datetime.fromisoformat(entry["updated_at"]),
                classes=[],
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue  # a torn sidecar (never written whole): not an item
        if classify:
            found = class_of.get(f"{item.split}/{item.id}{item.suffix}")
            if found is None:
                continue
            item.classes = [found]
        else:
            item.classes = classes_of(read_lines(dataset.labels_path(item)))
        dataset.put(item)
        sequence = int(item.id.partition("-")[0])
        dataset.next_sequence = max(dataset.next_sequence, sequence + 1)


def _classify_folders(dataset: StoredDataset) -> dict[str, int]:
    """`<split>/<file name>` -> the class id of the folder the image is in: each folder is
    listed once, not probed once per item and class."""
    found: dict[str, int] = {}
    for class_id, class_name in enumerate(dataset.info.names):
        for split in SPLITS:
            folder = dataset.folder / split / class_name
            if folder.is_dir():
                for image in folder.iterdir():
                    found[f"{split}/{image.name}"] = class_id
    return found


def write_sidecar(dataset: StoredDataset, item: StoredItem) -> None:
    data = json.dumps(item.sidecar()).encode("utf-8")
    write_atomic(dataset.folder / ITEMS_DIR / f"{item.id}.json", data, durable=False)


def read_lines(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [line.strip() for line in text.splitlines() if line.strip()]


def public_item(item: StoredItem) -> ItemInfo:
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


def item_source(source: str) -> ItemSource:
    for known in ITEM_SOURCES:
        if source == known:
            return known
    raise ValueError(f"source must be one of {', '.join(ITEM_SOURCES)}, not {source!r}")


def label_text(lines: Sequence[str]) -> bytes:
    return "".join(f"{line}\n" for line in lines).encode("utf-8")


def now_utc() -> datetime:
    return datetime.now(UTC)
