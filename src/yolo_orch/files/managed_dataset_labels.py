"""The label lines a managed dataset holds, checked for its task before they are written: YOLO
format, normalised, one object a line (`class x y w h`, a polygon, a box with keypoints, four
corners), or for classify one line holding the image's class id."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["IMAGE_SUFFIXES", "LabelsRefused", "checked_labels", "classes_of"]

IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff"})
"""What an item's image may be stored as: formats ultralytics reads for every task."""


class LabelsRefused(ValueError):
    """Why the lines do not fit the dataset; the caller says which dataset."""


def checked_labels(
    task: str,
    class_count: int,
    kpt_shape: tuple[int, int] | None,
    labels: Sequence[str],
) -> list[str]:
    """`labels` with surrounding blanks dropped, each line checked for the task's shape, a
    class id below `class_count` and coordinates in [0, 1]. Raises `LabelsRefused`."""
    lines = [line.strip() for line in labels if line.strip()]
    if task == "classify":
        if len(lines) != 1 or len(lines[0].split()) != 1:
            raise LabelsRefused("a classify item has one label line: its class id")
        _class_id(lines[0], class_count, 1)
        return lines
    for number, line in enumerate(lines, start=1):
        values = line.split()
        _check_shape(task, kpt_shape, len(values), number)
        _class_id(values[0], class_count, number)
        _coordinates(task, kpt_shape, values[1:], number)
    return lines


def classes_of(lines: Sequence[str]) -> list[int]:
    """The class id of each checked line (or of a label file's lines, read back)."""
    ids: list[int] = []
    for line in lines:
        head = line.split(maxsplit=1)
        if head and head[0].isdigit():
            ids.append(int(head[0]))
    return ids


def _check_shape(task: str, kpt_shape: tuple[int, int] | None, count: int, number: int) -> None:
    if task == "detect" and count != 5:
        raise LabelsRefused(f"line {number}: a detect label is `class x y w h` (5 values)")
    if task == "obb" and count != 9:
        raise LabelsRefused(
            f"line {number}: an obb label is `class x1 y1 x2 y2 x3 y3 x4 y4` (9 values)"
        )
    if task == "segment" and (count < 7 or count % 2 == 0):
        raise LabelsRefused(
            f"line {number}: a segment label is `class x1 y1 x2 y2 x3 y3 ...` (3 points or more)"
        )
    if task == "pose":
        points, dims = kpt_shape or (0, 0)  # a pose dataset always has its kpt_shape
        if count != 5 + points * dims:
            raise LabelsRefused(
                f"line {number}: a pose label is `class x y w h` and {points} keypoints of "
                f"{dims} values ({5 + points * dims} values)"
            )


def _class_id(value: str, class_count: int, number: int) -> None:
    if not value.isdigit() or int(value) >= class_count:
        raise LabelsRefused(
            f"line {number}: the class id {value[:20]!r} is not one of 0..{class_count - 1}"
        )


def _coordinates(
    task: str, kpt_shape: tuple[int, int] | None, values: Sequence[str], number: int
) -> None:
    visibility = kpt_shape is not None and kpt_shape[1] == 3 and task == "pose"
    for index, text in enumerate(values):
        try:
            value = float(text)
        except ValueError:
            raise LabelsRefused(f"line {number}: {text[:20]!r} is not a number") from None
        # a keypoint's third value is its visibility (0, 1 or 2), not a coordinate
        is_visibility = visibility and index >= 4 and (index - 4) % 3 == 2
        upper = 2.0 if is_visibility else 1.0
        if not math.isfinite(value) or not 0.0 <= value <= upper:
            raise LabelsRefused(
                f"line {number}: {text[:20]!r} is out of range: coordinates are normalised to 0..1"
            )
