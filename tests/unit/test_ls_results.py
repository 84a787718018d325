"""Result entries -> Label Studio results -> YOLO label lines, per task: the lines equal those
`yolo_labels` writes for the same entry (the capture's), within rounding."""

from __future__ import annotations

import math
from typing import Any

import pytest

from yolo_orch.labelling.ls_config import parse_label_config
from yolo_orch.labelling.ls_results import prediction, yolo_lines
from yolo_orch.labelling.yolo_labels import label_lines

NAMES = ["car", "person"]
IMAGE = "<Image name='image' value='$image'/>"
LABELS = "<Label value='car'/><Label value='Person' predicted_values='person'/>"
BOXES = f"<RectangleLabels name='label' toName='image'>{LABELS}</RectangleLabels>"
POLYGONS = f"<PolygonLabels name='poly' toName='image'>{LABELS}</PolygonLabels>"
POINTS = (
    "<KeyPointLabels name='kp' toName='image'>"
    "<Label value='nose'/><Label value='left_eye'/><Label value='right_eye'/></KeyPointLabels>"
)
CHOICES = (
    "<Choices name='class' toName='image'><Choice value='car'/><Choice value='person'/></Choices>"
)


def config(*controls: str) -> Any:
    return parse_label_config(f"<View>{IMAGE}{''.join(controls)}</View>")


def detection(name: str, conf: float, x1: float, y1: float, x2: float, y2: float) -> dict[str, Any]:
    return {
        "class_id": NAMES.index(name),
        "class_name": name,
        "confidence": conf,
        "box": {"x1": x1, "y1": y1, "x2": x2, "y2": y2},
    }


def entry(*detections: dict[str, Any]) -> dict[str, Any]:
    return {"source": "a.jpg", "width": 640, "height": 480, "detections": list(detections)}


def numbers(lines: list[str]) -> list[list[float]]:
    return [[float(value) for value in line.split()] for line in lines]


def assert_numbers(lines: list[str], expected: list[list[float]]) -> None:
    assert len(lines) == len(expected)
    for line, values in zip(numbers(lines), expected, strict=True):
        assert line == pytest.approx(values)


def assert_same_lines(ours: list[str], theirs: list[str]) -> None:
    assert len(ours) == len(theirs)
    for mine, other in zip(numbers(ours), numbers(theirs), strict=True):
        assert mine == pytest.approx(other, abs=2e-6)


def round_trip(task: str, found: dict[str, Any], cfg: Any, **kw: Any) -> list[str]:
    made = prediction(found, task, cfg)
    return yolo_lines(made.result, task, NAMES, cfg, **kw)


def test_detect_boxes_in_percent_and_back() -> None:
    found = entry(detection("car", 0.9, 64, 48, 320, 240), detection("person", 0.5, 0, 0, 64, 96))
    cfg = config(BOXES)

    made = prediction(found, "detect", cfg)

    first = made.result[0]
    assert first["type"] == "rectanglelabels"
    assert (first["from_name"], first["to_name"]) == ("label", "image")
    value = dict(first["value"])
    assert value.pop("rectanglelabels") == ["car"]
    assert value == pytest.approx(
        {"x": 10.0, "y": 10.0, "width": 40.0, "height": 40.0, "rotation": 0}
    )
    assert made.result[1]["value"]["rectanglelabels"] == ["Person"]  # predicted_values
    assert made.score == pytest.approx(0.7)
    assert_same_lines(
        yolo_lines(made.result, "detect", NAMES, cfg), label_lines("detect", found, NAMES)
    )


def test_classes_the_config_has_no_label_for_are_left_out() -> None:
    cfg = config(
        "<RectangleLabels name='label' toName='image'><Label value='car'/></RectangleLabels>"
    )
    made = prediction(entry(detection("person", 0.8, 0, 0, 10, 10)), "detect", cfg)
    assert (made.result, made.score, made.skipped) == ([], None, 1)


def test_an_unreadable_image_gets_an_empty_prediction() -> None:
    made = prediction({"source": "a.jpg", "error": "not an image"}, "detect", config(BOXES))
    assert (made.result, made.score) == ([], None)


def obb_detection(cx: float, cy: float, w: float, h: float, r: float) -> dict[str, Any]:
    """Corners as ultralytics' xywhr2xyxyxyxy orders them."""
    along = (w / 2 * math.cos(r), w / 2 * math.sin(r))
    down = (-h / 2 * math.sin(r), h / 2 * math.cos(r))
    points = [
        (cx + along[0] + down[0], cy + along[1] + down[1]),
        (cx + along[0] - down[0], cy + along[1] - down[1]),
        (cx - along[0] - down[0], cy - along[1] - down[1]),
        (cx - along[0] + down[0], cy - along[1] + down[1]),
    ]
    obb = {"cx": cx, "cy": cy, "w": w, "h": h, "rotation": r, "points": points}
    return {"class_id": 0, "class_name": "car", "confidence": 0.8, "obb": obb}


@pytest.mark.parametrize("rotation", [0.0, 0.52, 1.4, -0.3])
def test_obb_rotated_rectangles_and_back(rotation: float) -> None:
    found = entry(obb_detection(320, 200, 120, 40, rotation))
    cfg = config(BOXES)

    value = prediction(found, "obb", cfg).result[0]["value"]

    assert value["rotation"] == pytest.approx(math.degrees(rotation) % 360)
    assert value["width"] == pytest.approx(120 / 640 * 100)
    assert_same_lines(round_trip("obb", found, cfg), label_lines("obb", found, NAMES))


def test_segment_polygons_the_largest_ring_and_back() -> None:
    ring = [[100.0, 100.0], [300.0, 100.0], [300.0, 200.0], [100.0, 220.0]]
    small = [[10.0, 10.0], [20.0, 10.0], [20.0, 20.0]]
    found = entry(detection("car", 0.7, 100, 100, 300, 220) | {"mask": {"polygons": [small, ring]}})
    cfg = config(POLYGONS)

    made = prediction(found, "segment", cfg)

    assert [item["type"] for item in made.result] == ["polygonlabels"]
    assert made.result[0]["value"]["points"][0] == pytest.approx([100 / 640 * 100, 100 / 480 * 100])
    assert_same_lines(round_trip("segment", found, cfg), label_lines("segment", found, NAMES))


def test_segment_without_polygons_in_the_config_shows_boxes() -> None:
    found = entry(
        detection("car", 0.7, 100, 100, 300, 220)
        | {"mask": {"polygons": [[[1, 1], [5, 1], [5, 5]]]}}
    )
    made = prediction(found, "segment", config(BOXES))
    assert [item["type"] for item in made.result] == ["rectanglelabels"]


def pose_detection(
    conf: float, box: tuple[float, ...], points: list[tuple[Any, ...]]
) -> dict[str, Any]:
    return detection("person", conf, *box) | {"keypoints": points}


def test_pose_boxes_and_their_keypoints_and_back() -> None:
    found = entry(
        pose_detection(
            0.9, (100, 100, 200, 300), [(150, 120, 0.9), (140, 115, 0.2), (160, 115, 0.8)]
        ),
        pose_detection(0.6, (300, 50, 400, 250), [(350, 70, None), (0, 0, 0.1), (360, 65, 0.7)]),
    )
    cfg = config(BOXES, POINTS)

    made = prediction(found, "pose", cfg)

    kinds = [item["type"] for item in made.result]
    assert kinds.count("rectanglelabels") == 2
    assert kinds.count("keypointlabels") == 4
    box_ids = {item["id"] for item in made.result if item["type"] == "rectanglelabels"}
    parents = {item.get("parentID") for item in made.result if item["type"] == "keypointlabels"}
    assert parents == box_ids
    assert_same_lines(
        round_trip("pose", found, cfg, kpt_shape=(3, 3)), label_lines("pose", found, NAMES, (3, 3))
    )


def test_pose_keypoints_a_person_drew_go_to_the_smallest_box_holding_them() -> None:
    cfg = config(BOXES, POINTS)
    size = {"original_width": 100, "original_height": 100}

    def box(x: float, y: float, w: float, h: float) -> dict[str, Any]:
        value = {"x": x, "y": y, "width": w, "height": h, "rectanglelabels": ["Person"]}
        return {
            "from_name": "label",
            "to_name": "image",
            "type": "rectanglelabels",
            "value": value,
        } | size

    def point(x: float, y: float, label: str) -> dict[str, Any]:
        value = {"x": x, "y": y, "width": 1, "keypointlabels": [label]}
        return {
            "from_name": "kp",
            "to_name": "image",
            "type": "keypointlabels",
            "value": value,
        } | size

    results = [
        box(0, 0, 100, 100),
        box(10, 10, 20, 20),
        point(15, 15, "nose"),
        point(80, 80, "right_eye"),
    ]

    lines = yolo_lines(results, "pose", NAMES, cfg, kpt_shape=(3, 3))

    assert_numbers(
        lines,
        [
            [1, 0.5, 0.5, 1, 1, 0, 0, 0, 0, 0, 0, 0.8, 0.8, 2],
            [1, 0.2, 0.2, 0.2, 0.2, 0.15, 0.15, 2, 0, 0, 0, 0, 0, 0],
        ],
    )


def test_classify_a_choice_and_back() -> None:
    found = {
        "source": "a.jpg",
        "width": 64,
        "height": 64,
        "classes": [
            {"class_id": 1, "class_name": "person", "confidence": 0.8},
            {"class_id": 0, "class_name": "car", "confidence": 0.1},
        ],
    }
    cfg = config(CHOICES)

    made = prediction(found, "classify", cfg)

    assert made.result[0]["value"] == {"choices": ["person"]}
    assert made.score == pytest.approx(0.8)
    assert yolo_lines(made.result, "classify", NAMES, cfg) == label_lines("classify", found, NAMES)
    assert yolo_lines([], "classify", NAMES, cfg) == []


def test_a_rotated_rectangle_in_a_detect_project_is_its_bounding_box() -> None:
    cfg = config(BOXES)
    value = {"x": 50, "y": 0, "width": 50, "height": 50, "rotation": 90, "rectanglelabels": ["car"]}
    item: dict[str, Any] = {"from_name": "label", "type": "rectanglelabels", "value": value}
    item |= {"original_width": 100, "original_height": 100}

    assert_numbers(yolo_lines([item], "detect", NAMES, cfg), [[0, 0.25, 0.25, 0.5, 0.5]])


def test_regions_of_unknown_controls_or_labels_are_ignored() -> None:
    cfg = config(BOXES, CHOICES)
    value = {"x": 0, "y": 0, "width": 10, "height": 10, "rectanglelabels": ["truck"]}
    results = [
        {"from_name": "label", "value": value},
        {"from_name": "nothing", "value": value | {"rectanglelabels": ["car"]}},
        {"from_name": "class", "value": {"choices": ["car"]}},
    ]
    assert yolo_lines(results, "detect", NAMES, cfg) == []
