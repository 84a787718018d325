"""Managed datasets as plain values: the name and item-id grammars, the tasks a managed dataset
may have, how a new item's split follows from its id, and what a dataset and an item look like
to a reader (`DatasetInfo`, `ItemInfo`). The files are `yolo_orch.files.managed_datasets`'."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

DATASET_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,63}$"
"""A dataset's name: a slug, safe as a folder name, in a URL and after `dataset:`."""
DATASET_NAME_MAX_LENGTH = 64
DATASET_REF_PREFIX = "dataset:"
IMAGE_KEY = "image_key"
"""The `labelling` entry holding the key that opens a dataset's item images without a token
(the URLs pushed to Label Studio carry it: its pages load them with no Authorization header).
Never shown by the API."""
"""A training or validation job's `dataset` naming a managed dataset: `dataset:<name>`."""
ITEM_ID_PATTERN = r"^[0-9]{6,12}-[0-9a-f]{6}$"
"""An item's id: its sequence number in the dataset, then 6 random hex digits."""

MANAGED_TASKS = ("detect", "segment", "pose", "obb", "classify")
SPLITS = ("train", "val")
ItemSource = Literal["model", "annotation"]
ITEM_SOURCES: tuple[ItemSource, ...] = ("model", "annotation")
"""`model`: labels a model predicted, not checked by a person; `annotation`: a person's."""
VAL_EVERY = 5
"""One item in VAL_EVERY goes to `val` (the 2nd, 7th, 12th, ...), the others to `train`."""

_NAME = re.compile(DATASET_NAME_PATTERN)
_ITEM = re.compile(ITEM_ID_PATTERN)


def is_dataset_name(name: str) -> bool:
    return _NAME.fullmatch(name) is not None


def is_item_id(item: str) -> bool:
    return _ITEM.fullmatch(item) is not None


def item_id(sequence: int, random_hex: str) -> str:
    return f"{sequence:06d}-{random_hex}"


def split_of(item: str) -> str:
    """The split of an item, from the sequence number its id starts with: the second item
    of a dataset is in `val` already, so a dataset of two items can be trained on."""
    sequence = int(item.partition("-")[0])
    return "val" if sequence % VAL_EVERY == 1 else "train"


def dataset_ref_name(dataset: str) -> str | None:
    """The name in a job's `dataset: "dataset:<name>"`; None for a path under a data root."""
    if dataset.startswith(DATASET_REF_PREFIX):
        return dataset.removeprefix(DATASET_REF_PREFIX)
    return None


@dataclass(frozen=True)
class SplitCounts:
    images: int = 0
    instances: dict[str, int] = field(default_factory=dict)
    """Per class name: its objects (label lines), or for classify its images; classes with
    none are left out."""


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    task: str
    names: tuple[str, ...]
    kpt_shape: tuple[int, int] | None
    created_at: datetime
    labelling: dict[str, Any]
    """What the Label Studio backend keeps for the dataset (model, alias, train_after, ...)."""
    splits: dict[str, SplitCounts]
    sources: dict[str, int]
    """Items per source (`model`, `annotation`)."""

    @property
    def items(self) -> int:
        return sum(counts.images for counts in self.splits.values())


@dataclass(frozen=True)
class ItemInfo:
    id: str
    split: str
    source: ItemSource
    model_id: str | None
    job_id: str | None
    created_at: datetime
    updated_at: datetime
    instances: int
    """Label lines (objects); 1 for a classify item."""
