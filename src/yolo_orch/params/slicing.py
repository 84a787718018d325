"""Sliced inference (`params.slice`): a large image cut into overlapping tiles, each tile run at
the job's imgsz, the detections shifted back to the full image and merged (docs/slicing.md)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal

from pydantic import Field

from yolo_orch.errors import ErrorCode, InvalidJob
from yolo_orch.params.common import IMGSZ_MAX, StrictParams

SLICE_TASKS = ("detect", "segment", "obb")
"""Tasks whose detections can be shifted from a tile to the full image and merged."""

SLICE_SIZE_MIN = 64
DEFAULT_MAX_SLICES_PER_IMAGE = 256
"""Tiles (the whole image with `include_full` counts as one) one image may be cut into, by
default (the `max_slices_per_image` setting): an image beyond it becomes an error entry rather
than thousands of forward passes."""


class SliceParams(StrictParams):
    size: int = Field(
        default=640,
        ge=SLICE_SIZE_MIN,
        le=IMGSZ_MAX,
        description="Tile width and height in pixels of the image (a tile is then run at imgsz).",
    )
    overlap: float = Field(
        default=0.2,
        ge=0,
        le=0.5,
        description="Fraction of a tile shared with its neighbour, across and down.",
    )
    merge: Literal["nms", "nmm"] = Field(
        default="nms",
        description='How detections of overlapping tiles become one: "nms" keeps the most '
        'confident, "nmm" (greedy non-maximum merging, sahi\'s default) joins their boxes and '
        "masks into one with the best confidence. Per class. obb: nms only.",
    )
    iou: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="IoU above which two detections of one class are the same object.",
    )
    include_full: bool = Field(
        default=False,
        description="Also run the whole image at imgsz and merge its detections (large objects).",
    )

    def count(self, width: int, height: int) -> int:
        """The forward-pass images one image of this size takes."""
        step = self.size - int(self.size * self.overlap)
        across = 1 if width <= self.size else math.ceil((width - self.size) / step) + 1
        down = 1 if height <= self.size else math.ceil((height - self.size) / step) + 1
        return across * down + (1 if self.include_full else 0)


def check_slice_task(params: Mapping[str, object], task: str) -> None:
    """`merge: nmm` joins axis-aligned boxes; a rotated box has no such union (`task_mismatch`)."""
    sliced = params.get("slice")
    if isinstance(sliced, Mapping) and task == "obb" and sliced.get("merge") == "nmm":
        raise InvalidJob(
            'params.slice.merge "nmm" does not apply to obb models: use "nms"',
            code=ErrorCode.TASK_MISMATCH,
        )
