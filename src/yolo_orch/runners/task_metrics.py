"""A task's validation metrics as JSON, read from what ultralytics computed (its metrics object,
confusion matrix and timings), not derived again.

Names: ultralytics' `metrics/mAP50(B)` becomes `mAP50` (boxes), `(M)` masks `mask_mAP50`, `(P)`
keypoints `pose_mAP50`; `metrics/accuracy_top1` becomes `top1`; the others drop `metrics/`
(`mIoU`, `pixel_acc`, `delta1`, `abs_rel`, `rmse`, ...).
"""

from __future__ import annotations

import csv
import io
import math
import re
from typing import Any

from yolo_orch.domain import JsonObject

__all__ = ["confusion_matrix", "curves", "per_class", "per_class_csv", "scores", "speed"]

_KEY = re.compile(r"metrics/(?P<name>[^()]+)(?:\((?P<kind>[A-Z])\))?")
_KINDS = {"B": "", "M": "mask_", "P": "pose_"}
_RENAMED = {"accuracy_top1": "top1", "accuracy_top5": "top5"}


def scores(metrics: dict[str, Any]) -> JsonObject:
    """The scores among ultralytics' `metrics/...` values, under stable names."""
    found: JsonObject = {}
    for key, value in metrics.items():
        match = _KEY.fullmatch(str(key))
        if match is None:
            continue
        name = _RENAMED.get(match["name"], match["name"])
        found[_KINDS.get(match["kind"] or "B", "") + name] = _number(value)
    return found


def per_class(metrics: Any) -> list[JsonObject]:
    """One row per class as ultralytics summarises it (`Class`, `Images`, `Instances`, `Box-P`,
    `mAP50`, ... for detection tasks; `IoU` for semantic); none for classify and depth, whose
    summary is one overall row."""
    rows: list[dict[str, Any]] = metrics.summary()
    if not rows or "Class" not in rows[0]:
        return []
    return [{str(k): _json(v) for k, v in row.items()} for row in rows]


def per_class_csv(rows: list[JsonObject]) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


def confusion_matrix(validator: Any) -> JsonObject | None:
    """`matrix[predicted][true]` counts with the class names of both axes (detection tasks add
    `background`: missed objects are predicted background, false detections are true
    background); None for tasks without one (depth)."""
    matrix = getattr(validator, "confusion_matrix", None)
    if matrix is None or getattr(matrix, "matrix", None) is None:
        return None
    names = [str(n) for n in validator.names.values()]
    counts = [[_json(v) for v in row] for row in matrix.matrix.tolist()]
    if len(counts) == len(names) + 1:
        names.append("background")
    return {"names": names, "rows": "predicted", "columns": "true", "matrix": counts}


CURVE_POINTS = 101
"""Points kept of each curve (ultralytics computes 1000 over [0, 1]): enough to draw it, a few
kilobytes a class in the result."""


def curves(metrics: Any) -> list[JsonObject]:
    """The PR, F1, P and R curves as the dashboard draws them: `[{name, x_label, y_label, x,
    y: {class name: values}}]`, one series per class the split has; [] for tasks without
    (classify, semantic segmentation, depth)."""
    names = getattr(metrics, "curves", None) or []
    results = getattr(metrics, "curves_results", None) or []
    box = getattr(metrics, "box", None)
    classes = [] if box is None else [int(i) for i in getattr(metrics, "ap_class_index", [])]
    labels = dict(getattr(metrics, "names", {}) or {})
    found = []
    for name, (x, ys, x_label, y_label) in zip(names, results, strict=False):
        if len(ys) != len(classes) or not len(x):
            continue  # no class with a label in the split: nothing to draw
        picks = _evenly(len(x))
        series = {
            str(labels.get(index, index)): [_json(y[i]) for i in picks]
            for index, y in zip(classes, ys, strict=True)
        }
        found.append(
            {
                "name": str(name),
                "x_label": str(x_label),
                "y_label": str(y_label),
                "x": [_json(x[i]) for i in picks],
                "y": series,
            }
        )
    return found


def _evenly(length: int) -> list[int]:
    """`CURVE_POINTS` indices spread evenly over `length`, both ends included."""
    if length <= CURVE_POINTS:
        return list(range(length))
    return [round(i * (length - 1) / (CURVE_POINTS - 1)) for i in range(CURVE_POINTS)]


def speed(validator: Any) -> JsonObject:
    """Milliseconds per image for each stage (`preprocess`, `inference`, `loss`, `postprocess`)."""
    return {str(k): round(float(v), 3) for k, v in dict(validator.speed).items()}


def _number(value: Any) -> float | None:
    number = float(value)
    return round(number, 5) if math.isfinite(number) else None


def _json(value: Any) -> Any:
    """numpy scalars as plain numbers, non-finite floats as null."""
    if isinstance(value, str | bool) or value is None:
        return value
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float):
        return round(value, 5) if math.isfinite(value) else None
    return value
