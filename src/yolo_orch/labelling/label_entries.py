"""A managed dataset item's YOLO label lines (normalised 0..1) back as a result entry in pixels
(the shape `domain.results` gives an image of an inference job), so that `ls_results.prediction`
turns stored labels into a Label Studio prediction as it turns a model's. The inverse of
`yolo_labels.label_lines`; labels keep no confidence, so each object's is 1.0.

obb: the four corners are ultralytics' order (`xywhr2xyxyxyxy`): corner 0 minus corner 3 is the
box's width vector, corner 0 minus corner 1 its height vector.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

STORED_CONFIDENCE = 1.0


def entry_of_lines(
    task: str,
    lines: Sequence[str],
    names: Sequence[str],
    width: int,
    height: int,
) -> dict[str, Any]:
    """The entry of an image of `width` x `height` pixels whose labels are `lines`; lines of a
    class the dataset does not name are left out."""
    entry: dict[str, Any] = {"width": width, "height": height}
    parsed = [_numbers(line) for line in lines]
    known = [(int(values[0]), values[1:]) for values in parsed if _known(values, names)]
    if task == "classify":
        entry["classes"] = [
            {"class_id": class_id, "class_name": names[class_id], "confidence": STORED_CONFIDENCE}
            for class_id, _ in known[:1]
        ]
        return entry
    scale = _Pixels(width, height)
    entry["detections"] = [
        {
            "class_id": class_id,
            "class_name": names[class_id],
            "confidence": STORED_CONFIDENCE,
            **_shape(task, values, scale),
        }
        for class_id, values in known
    ]
    return entry


class _Pixels:
    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = float(width), float(height)

    def points(self, values: Sequence[float]) -> list[tuple[float, float]]:
        pairs = zip(values[0::2], values[1::2], strict=False)
        return [(x * self.width, y * self.height) for x, y in pairs]

    def box(self, cx: float, cy: float, w: float, h: float) -> dict[str, float]:
        return {
            "x1": (cx - w / 2) * self.width,
            "y1": (cy - h / 2) * self.height,
            "x2": (cx + w / 2) * self.width,
            "y2": (cy + h / 2) * self.height,
        }


def _shape(task: str, values: Sequence[float], scale: _Pixels) -> dict[str, Any]:
    if task == "segment":
        ring = scale.points(values)
        return {"box": _bounds(ring), "mask": {"polygons": [ring]}}
    if task == "obb":
        return {"box": _bounds(scale.points(values[:8])), "obb": _rotated(scale.points(values))}
    box = scale.box(*values[:4])
    if task == "pose":
        return {"box": box, "keypoints": _keypoints(values[4:], scale)}
    return {"box": box}


def _keypoints(values: Sequence[float], scale: _Pixels) -> list[tuple[float, float, float | None]]:
    """`x y v` triples (or `x y` pairs, all shown): a keypoint with `v` 0 gets confidence 0,
    which the prediction leaves out; a shown one has none."""
    triples = len(values) % 3 == 0 and all(v in (0.0, 1.0, 2.0) for v in values[2::3])
    step = 3 if triples else 2
    keypoints: list[tuple[float, float, float | None]] = []
    for start in range(0, len(values) - step + 1, step):
        x, y = values[start] * scale.width, values[start + 1] * scale.height
        hidden = step == 3 and values[start + 2] == 0.0
        keypoints.append((x, y, 0.0 if hidden else None))
    return keypoints


def _rotated(corners: Sequence[tuple[float, float]]) -> dict[str, Any]:
    (x0, y0), (x1, y1), _, (x3, y3) = corners[:4]
    cx = sum(x for x, _ in corners[:4]) / 4
    cy = sum(y for _, y in corners[:4]) / 4
    return {
        "cx": cx,
        "cy": cy,
        "w": math.hypot(x0 - x3, y0 - y3),
        "h": math.hypot(x0 - x1, y0 - y1),
        "rotation": math.atan2(y0 - y3, x0 - x3),
        "points": [list(corner) for corner in corners[:4]],
    }


def _bounds(points: Sequence[tuple[float, float]]) -> dict[str, float]:
    xs, ys = [x for x, _ in points], [y for _, y in points]
    return {"x1": min(xs), "y1": min(ys), "x2": max(xs), "y2": max(ys)}


def _numbers(line: str) -> list[float]:
    return [float(part) for part in line.split()]


def _known(values: Sequence[float], names: Sequence[str]) -> bool:
    return bool(values) and values[0].is_integer() and 0 <= int(values[0]) < len(names)
