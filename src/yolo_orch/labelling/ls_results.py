"""Between this server's result entries and Label Studio's results, per task, for one project's
labelling config (`ls_config`):

- `prediction`: a result entry (one image of an inference job; `domain/results.py`) -> the items
  of a Label Studio prediction's `result`, in percent of the image: rectangles (rotated for obb),
  polygons (segment), a box and its keypoints (pose, the keypoints' `parentID` naming the box),
  a choice (classify);
- `yolo_lines`: an annotation's `result` -> the YOLO label lines of the task, normalised (pose:
  keypoints grouped to their box by `parentID`, else by the smallest box holding them; classify:
  the chosen class's index, the one line).

What a project's config has no control for is left out (`Prediction.skipped` counts it), as are
classes no label stands for and regions of kinds the task cannot hold. Brush masks are not
converted either way (no encoder of Label Studio's RLE here): label segments with polygons.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from yolo_orch.labelling.ls_config import Control, ControlKind, LabelConfig

KEYPOINT_VISIBLE = 0.5
"""A predicted keypoint shown when its confidence is at least this (or it has none)."""
KEYPOINT_SIZE_PX = 4.0
"""How wide a predicted keypoint is drawn (its `width`, only a look)."""

Result = dict[str, Any]


@dataclass(frozen=True)
class Prediction:
    result: list[Result]
    score: float | None
    """The mean confidence of what it holds (None: nothing)."""
    skipped: int = 0
    """Detections no control or label of the config could show."""


def prediction(entry: Mapping[str, Any], task: str, config: LabelConfig) -> Prediction:
    """The Label Studio prediction of one image's entry (an image the model could not read,
    or a video, gives an empty one)."""
    width, height = entry.get("width"), entry.get("height")
    if "error" in entry or not width or not height:
        return Prediction([], None)
    image = _Image(config, float(width), float(height))
    if task == "classify":
        return image.choice(entry.get("classes") or [])
    for detection in entry.get("detections") or []:
        if task == "obb":
            image.rotated_box(detection)
        elif task == "segment":
            image.polygons(detection)
        elif task == "pose":
            image.pose(detection)
        else:
            image.box(detection)
    return image.done()


class _Image:
    def __init__(self, config: LabelConfig, width: float, height: float) -> None:
        self._config = config
        self._w, self._h = width, height
        self._items: list[Result] = []
        self._scores: list[float] = []
        self._skipped = 0

    def done(self) -> Prediction:
        score = sum(self._scores) / len(self._scores) if self._scores else None
        return Prediction(self._items, score, self._skipped)

    def _labelled(self, kind: ControlKind, class_name: str) -> tuple[Control, str] | None:
        control = self._config.control(kind)
        label = None if control is None else control.label_for(class_name)
        if control is None or label is None:
            self._skipped += 1
            return None
        return control, label

    def _add(self, control: Control, value: dict[str, Any], score: float, **extra: Any) -> str:
        region = f"r{len(self._items)}"
        self._items.append(
            {
                "id": region,
                "from_name": control.name,
                "to_name": control.to_name,
                "type": control.kind.value,
                "original_width": int(self._w),
                "original_height": int(self._h),
                "image_rotation": 0,
                "value": value,
                "score": score,
                **extra,
            }
        )
        self._scores.append(score)
        return region

    def box(self, detection: Mapping[str, Any]) -> str | None:
        found = self._labelled(ControlKind.RECTANGLES, detection["class_name"])
        if found is None:
            return None
        control, label = found
        box = detection["box"]
        value = {
            "x": box["x1"] / self._w * 100,
            "y": box["y1"] / self._h * 100,
            "width": (box["x2"] - box["x1"]) / self._w * 100,
            "height": (box["y2"] - box["y1"]) / self._h * 100,
            "rotation": 0,
            "rectanglelabels": [label],
        }
        return self._add(control, value, float(detection["confidence"]))

    def rotated_box(self, detection: Mapping[str, Any]) -> None:
        """Label Studio turns a rectangle about its corner (x, y), clockwise in degrees; the
        model turns it about its centre, in radians: the corner is the one the turn starts
        from (ultralytics' third point)."""
        found = self._labelled(ControlKind.RECTANGLES, detection["class_name"])
        if found is None:
            return
        control, label = found
        obb = detection["obb"]
        cos, sin = math.cos(obb["rotation"]), math.sin(obb["rotation"])
        half_w, half_h = obb["w"] / 2, obb["h"] / 2
        corner_x = obb["cx"] - half_w * cos + half_h * sin
        corner_y = obb["cy"] - half_w * sin - half_h * cos
        value = {
            "x": corner_x / self._w * 100,
            "y": corner_y / self._h * 100,
            "width": obb["w"] / self._w * 100,
            "height": obb["h"] / self._h * 100,
            "rotation": math.degrees(obb["rotation"]) % 360,
            "rectanglelabels": [label],
        }
        self._add(control, value, float(detection["confidence"]))

    def polygons(self, detection: Mapping[str, Any]) -> None:
        """The mask's largest part, as the dataset's labels keep it (`yolo_labels`); a box
        where the config has no polygons or the entry no ring (masks asked for as RLE)."""
        rings = [
            ring for ring in (detection.get("mask") or {}).get("polygons") or [] if len(ring) >= 3
        ]
        if not rings or self._config.control(ControlKind.POLYGONS) is None:
            self.box(detection)
            return
        found = self._labelled(ControlKind.POLYGONS, detection["class_name"])
        if found is None:
            return
        control, label = found
        ring = max(rings, key=_area)
        points = [[x / self._w * 100, y / self._h * 100] for x, y in ring]
        value = {"points": points, "closed": True, "polygonlabels": [label]}
        self._add(control, value, float(detection["confidence"]))

    def pose(self, detection: Mapping[str, Any]) -> None:
        box = self.box(detection)
        control = self._config.control(ControlKind.KEYPOINTS)
        if control is None:
            self._skipped += detection["keypoints"] != []
            return
        names = detection.get("keypoint_names") or []
        for index, (x, y, conf) in enumerate(detection["keypoints"]):
            if conf is not None and conf < KEYPOINT_VISIBLE:
                continue
            label = control.keypoint_label(index)
            if label is None and index < len(names):
                label = control.label_for(names[index])
            if label is None:
                continue
            value = {
                "x": x / self._w * 100,
                "y": y / self._h * 100,
                "width": KEYPOINT_SIZE_PX / self._w * 100,
                "keypointlabels": [label],
            }
            score = float(detection["confidence"] if conf is None else conf)
            extra = {} if box is None else {"parentID": box}
            self._add(control, value, score, **extra)

    def choice(self, classes: Sequence[Mapping[str, Any]]) -> Prediction:
        if classes:
            top = classes[0]
            found = self._labelled(ControlKind.CHOICES, top["class_name"])
            if found is not None:
                control, label = found
                item = {
                    "id": "r0",
                    "from_name": control.name,
                    "to_name": control.to_name,
                    "type": control.kind.value,
                    "value": {"choices": [label]},
                    "score": float(top["confidence"]),
                }
                self._items.append(item)
                self._scores.append(float(top["confidence"]))
        return self.done()


def yolo_lines(
    results: Sequence[Mapping[str, Any]],
    task: str,
    names: Sequence[str],
    config: LabelConfig,
    kpt_shape: tuple[int, int] | None = None,
) -> list[str]:
    """The YOLO label lines of one annotation (classify: one line, the class index; none when
    nothing was chosen)."""
    regions = [_Region.of(item, config) for item in results]
    known = [region for region in regions if region is not None]
    if task == "classify":
        return _choice_line(known, names)
    if task == "pose":
        return _pose_lines(known, names, kpt_shape or (17, 3))
    lines = []
    for region in known:
        if region.label_kind not in (ControlKind.RECTANGLES, ControlKind.POLYGONS):
            continue
        class_id = region.control.class_of(region.label, names)
        if class_id is None:
            continue
        if task == "obb":
            corners = region.corners()
            line = None if corners is None or len(corners) != 4 else _line(class_id, corners)
        elif task == "segment":
            corners = region.corners()
            line = None if corners is None or len(corners) < 3 else _line(class_id, corners)
        else:
            line = _box_line(class_id, region.bounds())
        if line is not None:
            lines.append(line)
    return lines


@dataclass(frozen=True)
class _Region:
    id: str | None
    control: Control
    label_kind: ControlKind
    label: str
    value: Mapping[str, Any]
    width: float
    height: float
    parent: str | None

    @classmethod
    def of(cls, item: Mapping[str, Any], config: LabelConfig) -> _Region | None:
        value = item.get("value")
        control = config.by_name(str(item.get("from_name", "")))
        if not isinstance(value, Mapping) or control is None:
            return None
        labels = value.get(control.kind.value)
        if not isinstance(labels, list) or not labels:
            return None
        return cls(
            item.get("id"),
            control,
            control.kind,
            str(labels[0]),
            value,
            float(item.get("original_width") or 100),
            float(item.get("original_height") or 100),
            item.get("parentID"),
        )

    def corners(self) -> list[tuple[float, float]] | None:
        """Normalised points: a polygon's, or a rectangle's four corners in ultralytics' order
        (the turned ones where it is turned; see `_Image.rotated_box`)."""
        if self.label_kind is ControlKind.POLYGONS:
            return [(float(x) / 100, float(y) / 100) for x, y in self.value.get("points", [])]
        if self.label_kind is not ControlKind.RECTANGLES:
            return None
        w, h = self.width, self.height
        x0, y0 = self.value["x"] / 100 * w, self.value["y"] / 100 * h
        bw, bh = self.value["width"] / 100 * w, self.value["height"] / 100 * h
        turn = math.radians(float(self.value.get("rotation") or 0))
        along = (bw * math.cos(turn), bw * math.sin(turn))
        down = (-bh * math.sin(turn), bh * math.cos(turn))
        p0 = (x0, y0)
        p1 = (x0 + along[0], y0 + along[1])
        p2 = (p1[0] + down[0], p1[1] + down[1])
        p3 = (x0 + down[0], y0 + down[1])
        return [(x / w, y / h) for x, y in (p2, p1, p0, p3)]

    def bounds(self) -> tuple[float, float, float, float]:
        """Normalised x1, y1, x2, y2 around it."""
        if self.label_kind is ControlKind.KEYPOINTS:
            x, y = self.value["x"] / 100, self.value["y"] / 100
            return x, y, x, y
        points = self.corners() or [(0.0, 0.0)]
        xs, ys = [x for x, _ in points], [y for _, y in points]
        return min(xs), min(ys), max(xs), max(ys)


def _choice_line(regions: Sequence[_Region], names: Sequence[str]) -> list[str]:
    for region in regions:
        if region.label_kind is ControlKind.CHOICES:
            class_id = region.control.class_of(region.label, names)
            if class_id is not None:
                return [str(class_id)]
    return []


def _pose_lines(
    regions: Sequence[_Region], names: Sequence[str], kpt_shape: tuple[int, int]
) -> list[str]:
    boxes = [r for r in regions if r.label_kind is ControlKind.RECTANGLES]
    classes = [box.control.class_of(box.label, names) for box in boxes]
    points: list[dict[int, tuple[float, float]]] = [{} for _ in boxes]
    count, dims = kpt_shape
    for region in regions:
        if region.label_kind is not ControlKind.KEYPOINTS:
            continue
        index = region.control.keypoint_index(region.label)
        owner = _owner(region, boxes)
        if index is not None and index < count and owner is not None:
            x, y, _, _ = region.bounds()
            points[owner].setdefault(index, (_clamped(x), _clamped(y)))
    lines = []
    for box, class_id, found in zip(boxes, classes, points, strict=True):
        if class_id is None:
            continue
        parts: list[str] = []
        for index in range(count):
            x, y = found.get(index, (0.0, 0.0))
            shown = _numbers([x, y])
            parts.append(shown if dims == 2 else f"{shown} {2 if index in found else 0}")
        lines.append(f"{_box_line(class_id, box.bounds())} {' '.join(parts)}")
    return lines


def _owner(point: _Region, boxes: Sequence[_Region]) -> int | None:
    """The box a keypoint belongs to: the one its `parentID` names, else the smallest one
    holding it."""
    if point.parent is not None:
        for index, box in enumerate(boxes):
            if box.id == point.parent:
                return index
    x, y, _, _ = point.bounds()
    holding = []
    for index, box in enumerate(boxes):
        x1, y1, x2, y2 = box.bounds()
        if x1 <= x <= x2 and y1 <= y <= y2:
            holding.append(((x2 - x1) * (y2 - y1), index))
    return min(holding)[1] if holding else None


def _box_line(class_id: int, bounds: tuple[float, float, float, float]) -> str:
    x1, y1, x2, y2 = (_clamped(v) for v in bounds)
    return f"{class_id} {_numbers([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1])}"


def _line(class_id: int, points: Sequence[tuple[float, float]]) -> str:
    return f"{class_id} {_numbers([_clamped(v) for point in points for v in point])}"


def _numbers(values: Sequence[float]) -> str:
    return " ".join(f"{value:.6f}" for value in values)


def _area(ring: Sequence[Sequence[float]]) -> float:
    """Twice the ring's area (the shoelace formula), whichever way it turns."""
    return abs(
        sum(
            x1 * y2 - x2 * y1 for (x1, y1), (x2, y2) in zip(ring, [*ring[1:], ring[0]], strict=True)
        )
    )


def _clamped(value: float) -> float:
    return min(1.0, max(0.0, value))
