"""A result entry of each task as YOLO label lines (`labelling.yolo_labels`); each entry is
checked against the result shapes the API publishes (`domain.results`), so they stay real."""

from __future__ import annotations

from typing import Any

import pytest

from yolo_orch.domain.results import (
    ClassifyImage,
    DetectImage,
    ObbImage,
    PoseImage,
    SegmentImage,
)
from yolo_orch.labelling.yolo_labels import UnknownClass, label_lines

NAMES = ["person", "car"]


def entry(shape: type[Any], **fields: Any) -> dict[str, Any]:
    value: dict[str, Any] = {"source": "a.jpg", "width": 200, "height": 100, **fields}
    shape.model_validate(value)  # the shape the job's result holds
    return value


def found(class_name: str = "car", confidence: float = 0.4, **more: Any) -> dict[str, Any]:
    class_id = NAMES.index(class_name) if class_name in NAMES else 7
    return {
        "class_id": class_id,
        "class_name": class_name,
        "confidence": confidence,
        "box": {"x1": 20.0, "y1": 10.0, "x2": 60.0, "y2": 50.0},
        **more,
    }


def numbers(line: str) -> list[float]:
    return [float(part) for part in line.split()]


def test_detect_boxes_are_centre_and_size_of_the_image() -> None:
    image = entry(DetectImage, detections=[found("car"), found("person")])
    assert label_lines("detect", image, NAMES) == [
        "1 0.200000 0.300000 0.200000 0.400000",
        "0 0.200000 0.300000 0.200000 0.400000",
    ]


def test_an_image_without_detections_has_no_lines() -> None:
    assert label_lines("detect", entry(DetectImage, detections=[]), NAMES) == []


def test_classes_are_the_datasets_by_name_and_one_it_lacks_is_refused() -> None:
    image = entry(DetectImage, detections=[found("car")])
    assert label_lines("detect", image, ["car"])[0].startswith("0 ")
    with pytest.raises(UnknownClass, match="'dog'"):
        label_lines("detect", entry(DetectImage, detections=[found("dog")]), NAMES)


def test_a_box_past_the_image_is_clipped_to_it() -> None:
    outside = found(box={"x1": -10.0, "y1": 80.0, "x2": 210.0, "y2": 120.0})
    [line] = label_lines("detect", entry(DetectImage, detections=[outside]), NAMES)
    assert numbers(line) == [1, 0.5, 0.9, 1.0, 0.2]


def test_segment_keeps_the_largest_ring() -> None:
    small = [(0.0, 0.0), (10.0, 0.0), (10.0, 10.0)]
    large = [(100.0, 0.0), (200.0, 0.0), (200.0, 100.0), (100.0, 100.0)]
    mask = {"polygons": [small, large]}
    [line] = label_lines("segment", entry(SegmentImage, detections=[found(mask=mask)]), NAMES)
    assert numbers(line) == [1, 0.5, 0, 1, 0, 1, 1, 0.5, 1]


def test_a_segment_detection_without_a_ring_is_its_box() -> None:
    [line] = label_lines("segment", entry(SegmentImage, detections=[found(mask=None)]), NAMES)
    assert numbers(line) == [1, 0.1, 0.1, 0.3, 0.1, 0.3, 0.5, 0.1, 0.5]


def test_pose_box_then_keypoints_with_visibility_from_confidence() -> None:
    keypoints = [[50.0, 20.0, 0.9], [40.0, 30.0, 0.2], [30.0, 40.0, None]]
    image = entry(PoseImage, detections=[found("person", keypoints=keypoints)])
    [line] = label_lines("pose", image, NAMES, (3, 3))
    assert numbers(line) == [0, 0.2, 0.3, 0.2, 0.4, 0.25, 0.2, 2, 0, 0, 0, 0.15, 0.4, 2]
    [two_values] = label_lines("pose", image, NAMES, (3, 2))
    assert numbers(two_values)[5:] == [0.25, 0.2, 0, 0, 0.15, 0.4]
    with pytest.raises(ValueError, match="3 keypoints, the dataset 17"):
        label_lines("pose", image, NAMES, (17, 3))


def test_obb_is_its_four_corners() -> None:
    points = [(40.0, 10.0), (80.0, 30.0), (60.0, 70.0), (20.0, 50.0)]
    rotated = {"cx": 50.0, "cy": 40.0, "w": 44.7, "h": 44.7, "rotation": 0.46, "points": points}
    detection = {"class_id": 0, "class_name": "car", "confidence": 0.3, "obb": rotated}
    [line] = label_lines("obb", entry(ObbImage, detections=[detection]), NAMES)
    assert numbers(line) == [1, 0.2, 0.1, 0.4, 0.3, 0.3, 0.7, 0.1, 0.5]


def test_classify_is_one_line_its_top_class() -> None:
    scores = [
        {"class_id": 1, "class_name": "car", "confidence": 0.6},
        {"class_id": 0, "class_name": "person", "confidence": 0.4},
    ]
    image = entry(ClassifyImage, classes=scores)
    assert label_lines("classify", image, NAMES) == ["1"]
    assert label_lines("classify", image, ["car", "person"]) == ["0"]
    stream_frame = {"width": 200, "height": 100, "detections": scores}
    assert label_lines("classify", stream_frame, NAMES) == ["1"]
    with pytest.raises(UnknownClass):
        label_lines("classify", image, ["person"])
