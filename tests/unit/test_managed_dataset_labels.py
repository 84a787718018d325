"""The label lines a managed dataset takes, per task, and how a new item's split follows from
its id."""

from __future__ import annotations

import pytest

from yolo_orch.domain.managed_datasets import (
    dataset_ref_name,
    is_dataset_name,
    is_item_id,
    item_id,
    split_of,
)
from yolo_orch.files.managed_dataset_labels import LabelsRefused, checked_labels, classes_of


@pytest.mark.parametrize(
    ("task", "line"),
    [
        ("detect", "1 0.5 0.5 0.2 0.1"),
        ("segment", "0 0.1 0.1 0.9 0.1 0.5 0.9"),
        ("obb", "1 0.1 0.1 0.9 0.1 0.9 0.9 0.1 0.9"),
        ("pose", "0 0.5 0.5 0.2 0.2 0.4 0.4 2 0.6 0.6 0"),
    ],
)
def test_each_task_takes_its_shape(task: str, line: str) -> None:
    shape = (2, 3) if task == "pose" else None
    assert checked_labels(task, 2, shape, [f"  {line} ", ""]) == [line]


@pytest.mark.parametrize(
    ("task", "lines", "why"),
    [
        ("detect", ["0 0.5 0.5 0.2"], "5 values"),
        ("detect", ["2 0.5 0.5 0.2 0.2"], "class id"),
        ("detect", ["-1 0.5 0.5 0.2 0.2"], "class id"),
        ("detect", ["0 0.5 0.5 1.2 0.2"], "out of range"),
        ("detect", ["0 0.5 nan 0.2 0.2"], "out of range"),
        ("detect", ["0 0.5 x 0.2 0.2"], "not a number"),
        ("segment", ["0 0.1 0.1 0.9 0.1"], "3 points"),
        ("segment", ["0 0.1 0.1 0.9 0.1 0.5 0.9 0.3"], "3 points"),
        ("obb", ["0 0.5 0.5 0.2 0.2"], "9 values"),
        ("pose", ["0 0.5 0.5 0.2 0.2 0.4 0.4 2"], "keypoints"),
        ("pose", ["0 0.5 0.5 0.2 0.2 0.4 0.4 3 0.6 0.6 0"], "out of range"),
        ("classify", ["0", "1"], "one label line"),
        ("classify", ["0 0.5"], "one label line"),
        ("classify", [], "one label line"),
        ("classify", ["7"], "class id"),
    ],
)
def test_what_does_not_fit_is_refused(task: str, lines: list[str], why: str) -> None:
    shape = (2, 3) if task == "pose" else None
    with pytest.raises(LabelsRefused, match=why):
        checked_labels(task, 2, shape, lines)


def test_no_lines_is_a_background_image_and_classify_takes_one_id() -> None:
    assert checked_labels("detect", 2, None, []) == []
    assert checked_labels("classify", 2, None, ["1"]) == ["1"]
    assert classes_of(["1 0.5 0.5 0.2 0.2", "0 0.1 0.1 0.1 0.1", "1"]) == [1, 0, 1]


def test_one_item_in_five_goes_to_val_from_the_second_on() -> None:
    splits = [split_of(item_id(n, "abcdef")) for n in range(10)]
    assert splits == ["train", "val", "train", "train", "train"] * 2
    assert is_item_id(item_id(12, "0a1b2c"))
    assert not is_item_id("../000001-abcdef")


def test_names_are_slugs_and_dataset_refs_name_them() -> None:
    assert is_dataset_name("cars-2_b")
    for bad in ("", "Cars", "-x", "a/b", "..", "a" * 65, "a.b"):
        assert not is_dataset_name(bad), bad
    assert dataset_ref_name("dataset:cars") == "cars"
    assert dataset_ref_name("ds/data.yaml") is None
