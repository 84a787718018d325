"""`--space` as `yolo-orch tune` reads it, and the body the client sends."""

from __future__ import annotations

import pytest

from yolo_orch.client.tune import parse_space, tune_body


def test_ranges_and_choices_become_the_jobs_space() -> None:
    space = parse_space(
        ["lr0=0.0005..0.05:log", "batch=8..32:step=8", "optimizer=SGD|AdamW", "imgsz=96|128"]
    )
    assert space == {
        "lr0": {"low": 0.0005, "high": 0.05, "log": True},
        "batch": {"low": 8, "high": 32, "step": 8},
        "optimizer": {"choices": ["SGD", "AdamW"]},
        "imgsz": {"choices": [96, 128]},
    }


@pytest.mark.parametrize("spec", ["lr0", "=1..2", "lr0=", "lr0=1..2:cube"])
def test_a_malformed_spec_is_refused_with_what_it_should_be(spec: str) -> None:
    with pytest.raises(ValueError, match=r"lr0|NAME="):
        parse_space([spec])


def test_settings_left_unset_are_the_servers_defaults() -> None:
    body = tune_body(
        "yolo11n.yaml", None, {"lr0": {"choices": [0.01]}}, {"trials": 3, "seed": None}, 5
    )
    assert body == {
        "kind": "tune",
        "model": "yolo11n.yaml",
        "params": {"space": {"lr0": {"choices": [0.01]}}, "trials": 3},
        "priority": 5,
    }
