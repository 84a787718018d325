"""A result entry (`domain.results`: an inference job's image, a stream's frame) as YOLO label
lines for a managed dataset, each coordinate 0..1 of the entry's `width` and `height`:

- detect: `class cx cy w h`;
- segment: `class x1 y1 x2 y2 ...`, the mask's largest ring (as ultralytics' own `save_txt`
  keeps one polygon per object); a detection without a ring of 3 points: its box's corners;
- pose: `class cx cy w h` then `x y v` per keypoint (`x y` for a 2-value `kpt_shape`); `v` is 2
  (visible) when the keypoint's confidence is at least `VISIBLE_FROM` or the model gives none,
  else the keypoint is `0 0 0` (not labelled), as in COCO;
- obb: `class x1 y1 x2 y2 x3 y3 x4 y4`, the four corners;
- classify: one line, the top class's id (the dataset files the image under that class).

Class ids are the dataset's, found by class name: a model whose class the dataset does not name
raises `UnknownClass`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

VISIBLE_FROM = 0.5
"""The keypoint confidence from which a keypoint is labelled visible (ultralytics draws and
scores keypoints from 0.5)."""


class UnknownClass(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(f"the dataset has no class {name!r}")
        self.name = name


def label_lines(
    task: str,
    entry: Mapping[str, Any],
    names: Sequence[str],
    kpt_shape: tuple[int, int] | None = None,
) -> list[str]:
    """The entry's label lines for a dataset of `task` with class `names` (and, for pose, its
    `kpt_shape`)."""
    classes = {name: index for index, name in enumerate(names)}
    if task == "classify":
        return [str(classes[_top_class(entry, classes)])]
    scale = _Scale(float(entry["width"]), float(entry["height"]))
    lines = []
    for detection in entry.get("detections") or []:
        name = str(detection["class_name"])
        if name not in classes:
            raise UnknownClass(name)
        lines.append(f"{classes[name]} {_shape(task, detection, scale, kpt_shape)}")
    return lines


def _top_class(entry: Mapping[str, Any], classes: Mapping[str, int]) -> str:
    """A classify entry's best class (streams list classes as `detections`)."""
    listed = entry.get("classes") or entry.get("detections") or []
    if not listed:
        raise ValueError("a classify entry without a class")
    name = str(listed[0]["class_name"])
    if name not in classes:
        raise UnknownClass(name)
    return name


class _Scale:
    def __init__(self, width: float, height: float) -> None:
        self._width = max(width, 1.0)
        self._height = max(height, 1.0)

    def x(self, value: float) -> str:
        return _number(value / self._width)

    def y(self, value: float) -> str:
        return _number(value / self._height)

    def point(self, point: Sequence[float]) -> str:
        return f"{self.x(point[0])} {self.y(point[1])}"

    def box(self, box: Mapping[str, float]) -> str:
        x1, y1 = max(box["x1"], 0.0), max(box["y1"], 0.0)
        x2 = min(box["x2"], self._width)
        y2 = min(box["y2"], self._height)
        centre = f"{self.x((x1 + x2) / 2)} {self.y((y1 + y2) / 2)}"
        return f"{centre} {self.x(x2 - x1)} {self.y(y2 - y1)}"


def _number(value: float) -> str:
    return f"{min(max(value, 0.0), 1.0):.6f}"


def _shape(
    task: str, detection: Mapping[str, Any], scale: _Scale, kpt_shape: tuple[int, int] | None
) -> str:
    if task == "detect":
        return scale.box(detection["box"])
    if task == "segment":
        return _points(scale, _largest_ring(detection))
    if task == "pose":
        return f"{scale.box(detection['box'])} {_keypoints(detection, scale, kpt_shape)}"
    if task == "obb":
        return _points(scale, detection["obb"]["points"])
    raise ValueError(f"no YOLO labels for {task} results")


def _points(scale: _Scale, points: Iterable[Sequence[float]]) -> str:
    return " ".join(scale.point(point) for point in points)


def _largest_ring(detection: Mapping[str, Any]) -> Sequence[Sequence[float]]:
    mask = detection.get("mask") or {}
    rings = [ring for ring in mask.get("polygons") or [] if len(ring) >= 3]
    if rings:
        return max(rings, key=_area)
    box = detection["box"]
    x1, y1, x2, y2 = box["x1"], box["y1"], box["x2"], box["y2"]
    return [(x1, y1), (x2, y1), (x2, y2), (x1, y2)]


def _area(ring: Sequence[Sequence[float]]) -> float:
    """The shoelace formula: the ring's area, whichever way it turns."""
    twice = sum(
        x1 * y2 - x2 * y1
        for (x1, y1, *_), (x2, y2, *_) in zip(ring, [*ring[1:], ring[0]], strict=True)
    )
    return abs(twice) / 2


def _keypoints(
    detection: Mapping[str, Any], scale: _Scale, kpt_shape: tuple[int, int] | None
) -> str:
    keypoints = detection["keypoints"]
    count, dims = kpt_shape if kpt_shape is not None else (len(keypoints), 3)
    if len(keypoints) != count:
        raise ValueError(f"the model gives {len(keypoints)} keypoints, the dataset {count}")
    parts = []
    for x, y, confidence in keypoints:
        visible = confidence is None or confidence >= VISIBLE_FROM
        shown = scale.point((x, y)) if visible else "0.000000 0.000000"
        parts.append(f"{shown} {2 if visible else 0}" if dims == 3 else shown)
    return " ".join(parts)
