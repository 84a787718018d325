"""The capture rule and its caps (`labelling.capture_rule`): each condition of `when`, and the
per-job caps, the hourly one on a fake clock."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from yolo_orch.errors import ErrorCode, InvalidJob
from yolo_orch.labelling.capture_rule import CaptureCaps, CaptureRule
from yolo_orch.params.capture import CaptureParams, CaptureWhen
from yolo_orch.params.inference import check_task


def detection(class_id: int, confidence: float) -> dict[str, Any]:
    return {
        "class_id": class_id,
        "class_name": f"c{class_id}",
        "confidence": confidence,
        "box": {"x1": 1.0, "y1": 2.0, "x2": 30.0, "y2": 40.0},
    }


def image(*detections: dict[str, Any]) -> dict[str, Any]:
    return {"source": "a.jpg", "width": 64, "height": 48, "detections": list(detections)}


def rule(task: str = "detect", **when: Any) -> CaptureRule:
    return CaptureRule(CaptureWhen(**when), task)


def test_conf_below_selects_an_image_with_a_detection_less_sure_than_it() -> None:
    unsure = rule(conf_below=0.5)
    assert unsure.selects(image(detection(0, 0.9), detection(1, 0.4)), 1)
    assert not unsure.selects(image(detection(0, 0.9), detection(1, 0.5)), 1)
    assert not unsure.selects(image(), 1)


def test_conf_above_and_below_make_one_band() -> None:
    band = rule(conf_below=0.6, conf_above=0.3)
    assert band.selects(image(detection(0, 0.3)), 1)
    assert band.selects(image(detection(0, 0.59)), 1)
    assert not band.selects(image(detection(0, 0.29), detection(1, 0.6)), 1)


def test_conf_above_alone_selects_sure_detections() -> None:
    assert rule(conf_above=0.8).selects(image(detection(0, 0.85)), 1)
    assert not rule(conf_above=0.8).selects(image(detection(0, 0.79)), 1)


def test_classes_restrict_the_detection_test_and_alone_select_any_of_theirs() -> None:
    assert rule(classes=[2]).selects(image(detection(2, 0.99)), 1)
    assert not rule(classes=[2]).selects(image(detection(1, 0.1)), 1)
    of_two = rule(classes=[2], conf_below=0.5)
    assert not of_two.selects(image(detection(1, 0.1), detection(2, 0.9)), 1)
    assert of_two.selects(image(detection(1, 0.9), detection(2, 0.4)), 1)


def test_no_detections_selects_an_empty_image_only() -> None:
    empty = rule(no_detections=True)
    assert empty.selects(image(), 5)
    assert not empty.selects(image(detection(0, 0.1)), 5)


def test_every_n_selects_the_first_then_every_nth_image() -> None:
    every = rule(every_n=3)
    assert [n for n in range(1, 11) if every.selects(image(detection(0, 0.9)), n)] == [1, 4, 7, 10]
    assert all(rule(every_n=1).selects(image(), n) for n in range(1, 5))


def test_any_condition_given_selects() -> None:
    either = rule(every_n=10, no_detections=True, conf_below=0.3)
    assert either.selects(image(detection(0, 0.9)), 11)  # every_n
    assert either.selects(image(), 2)  # no detections
    assert either.selects(image(detection(0, 0.2)), 2)  # unsure
    assert not either.selects(image(detection(0, 0.9)), 2)


def test_classify_tests_the_top_class_alone() -> None:
    classes = {
        "width": 64,
        "height": 48,
        "classes": [
            {"class_id": 3, "class_name": "c3", "confidence": 0.9},
            {"class_id": 1, "class_name": "c1", "confidence": 0.05},
        ],
    }
    assert not rule("classify", conf_below=0.5).selects(classes, 2)
    assert rule("classify", conf_below=0.95).selects(classes, 2)
    assert not rule("classify", classes=[1]).selects(classes, 2)
    assert not rule("classify", no_detections=True).selects(classes, 2)
    stream_frame = {"width": 64, "height": 48, "detections": classes["classes"]}  # a stream's
    assert rule("classify", classes=[3]).selects(stream_frame, 2)


@pytest.mark.parametrize(
    "when",
    [{}, {"no_detections": False}, {"conf_above": 0.5, "conf_below": 0.5}, {"every_n": 0}],
)
def test_a_rule_that_selects_nothing_or_a_bad_bound_is_refused(when: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        CaptureParams.model_validate({"into": "cams", "when": when})


def test_a_dataset_name_must_be_safe_in_a_path() -> None:
    for name in ("../up", "a/b", ".hidden", ""):
        with pytest.raises(ValidationError):
            CaptureParams.model_validate({"into": name, "when": {"every_n": 1}})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def take_all(caps: CaptureCaps, tries: int) -> int:
    taken = 0
    for _ in range(tries):
        if caps.allows():
            caps.took()
            taken += 1
    return taken


def test_max_total_caps_the_job_for_good() -> None:
    caps = CaptureCaps(3, None, Clock())
    assert take_all(caps, 10) == 3
    assert not caps.allows()


def test_max_per_hour_is_a_sliding_window() -> None:
    clock = Clock()
    caps = CaptureCaps(100, 2, clock)
    assert take_all(caps, 5) == 2
    clock.now += 1800
    assert caps.allows() is False
    assert take_all(caps, 1) == 0
    clock.now += 1800  # the first two are an hour old now
    assert take_all(caps, 5) == 2
    clock.now += 3599.5
    assert not caps.allows()
    clock.now += 0.5
    assert take_all(caps, 3) == 2


def test_an_image_not_taken_leaves_the_hour_as_it_was() -> None:
    clock = Clock()
    caps = CaptureCaps(100, 1, clock)
    assert caps.allows()  # asked, but its image never queued (a full queue): no place used
    clock.now += 10
    assert take_all(caps, 3) == 1


@pytest.mark.parametrize("task", ["semantic", "depth"])
def test_capture_is_refused_for_tasks_a_dataset_cannot_hold(task: str) -> None:
    capture = {"into": "cams", "when": {"every_n": 1}}
    with pytest.raises(InvalidJob, match=r"params\.capture does not apply") as refused:
        check_task({"capture": capture}, task)
    assert refused.value.code == ErrorCode.TASK_MISMATCH
    check_task({"capture": capture}, "obb")
