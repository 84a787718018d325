"""Stored YOLO label lines back as a result entry: what `yolo_labels.label_lines` makes of that
entry is the lines again, for every task; and the entry is what Label Studio predictions are
made from."""

from __future__ import annotations

import math

import pytest

from yolo_orch.labelling.label_entries import entry_of_lines
from yolo_orch.labelling.yolo_labels import label_lines

NAMES = ("cat", "dog")
WIDTH, HEIGHT = 640, 480


@pytest.mark.parametrize(
    ("task", "lines", "kpt_shape"),
    [
        (
            "detect",
            ["0 0.500000 0.500000 0.250000 0.100000", "1 0.100000 0.200000 0.050000 0.040000"],
            None,
        ),
        ("segment", ["1 0.100000 0.100000 0.400000 0.100000 0.300000 0.500000"], None),
        (
            "pose",
            ["0 0.500000 0.500000 0.200000 0.400000 0.450000 0.400000 2 0.000000 0.000000 0"],
            (2, 3),
        ),
        (
            "pose",
            ["1 0.500000 0.500000 0.200000 0.400000 0.450000 0.400000 0.550000 0.600000"],
            (2, 2),
        ),
        (
            "obb",
            ["0 0.600000 0.400000 0.600000 0.600000 0.400000 0.600000 0.400000 0.400000"],
            None,
        ),
        ("classify", ["1"], None),
    ],
)
def test_lines_to_an_entry_and_back_are_the_same_lines(
    task: str, lines: list[str], kpt_shape: tuple[int, int] | None
) -> None:
    entry = entry_of_lines(task, lines, NAMES, WIDTH, HEIGHT)
    assert label_lines(task, entry, NAMES, kpt_shape) == lines


def test_a_box_is_in_pixels_with_the_class_name_and_a_stored_confidence() -> None:
    entry = entry_of_lines("detect", ["1 0.5 0.5 0.25 0.5"], NAMES, WIDTH, HEIGHT)
    assert entry["width"] == WIDTH
    (detection,) = entry["detections"]
    assert detection["class_name"] == "dog"
    assert detection["confidence"] == 1.0
    assert detection["box"] == {"x1": 240.0, "y1": 120.0, "x2": 400.0, "y2": 360.0}


def test_an_obb_turns_as_its_corners_say() -> None:
    # A 0.2 x 0.1 box turned a quarter turn: corner 0 minus corner 3 points down the image.
    corners = "0.55 0.6 0.45 0.6 0.45 0.4 0.55 0.4"
    (detection,) = entry_of_lines("obb", [f"0 {corners}"], NAMES, 100, 100)["detections"]
    obb = detection["obb"]
    assert math.isclose(obb["cx"], 50.0)
    assert math.isclose(obb["cy"], 50.0)
    assert math.isclose(obb["w"], 20.0)
    assert math.isclose(obb["h"], 10.0)
    assert math.isclose(obb["rotation"], math.pi / 2)


def test_lines_of_a_class_the_dataset_does_not_name_are_left_out() -> None:
    entry = entry_of_lines("detect", ["7 0.5 0.5 0.1 0.1", "0 0.5 0.5 0.1 0.1"], NAMES, 10, 10)
    assert [each["class_name"] for each in entry["detections"]] == ["cat"]
    assert entry_of_lines("classify", ["9"], NAMES, 10, 10)["classes"] == []


def test_a_hidden_keypoint_has_confidence_zero_and_a_shown_one_none() -> None:
    line = "0 0.5 0.5 0.2 0.2 0.4 0.4 2 0 0 0"
    (detection,) = entry_of_lines("pose", [line], NAMES, 100, 100)["detections"]
    assert detection["keypoints"] == [(40.0, 40.0, None), (0.0, 0.0, 0.0)]
