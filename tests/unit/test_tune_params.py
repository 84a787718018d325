"""A tune's params: the search space is held to TrainingParams' own fields and bounds, and each
trial's training params are the base with the sampled values and the tune's epochs."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from yolo_orch.params.training import TrainingParams
from yolo_orch.params.tune import MAX_TRIALS, TuneParams


def _tune(**fields: Any) -> TuneParams:
    return TuneParams.model_validate(
        {"space": {"lr0": {"low": 0.001, "high": 0.1, "log": True}}, **fields}
    )


@pytest.mark.parametrize(
    ("space", "says"),
    [
        ({"lr0": {"low": 0.0, "high": 0.1}}, "0.0 is not a valid lr0"),  # TrainingParams: gt=0
        ({"lr0": {"low": 0.01, "high": 1.5}}, "1.5 is not a valid lr0"),  # le=1
        ({"batch": {"low": 0, "high": 16}}, "0 is not a valid batch"),
        ({"imgsz": {"low": 32, "high": 100_000}}, "is not a valid imgsz"),
        ({"batch": {"low": 8, "high": 16, "step": 2.5}}, "integers"),
        ({"optimizer": {"choices": ["SGD", "Lion"]}}, "'Lion' is not a valid optimizer"),
        ({"momentum": {"low": 0.8, "high": 0.9}}, "not a training param"),
        ({"epochs": {"low": 1, "high": 9}}, "not a training param"),
        ({"output_name": {"choices": ["a"]}}, "not a training param"),
        ({"sim_seconds": {"low": 1, "high": 2}}, "not a training param"),
        ({"lr0": {"low": 0.1, "high": 0.01}}, "low is above high"),
        ({"lr0": {"low": 0.001, "high": 0.1, "log": True, "step": 0.001}}, "not both"),
        ({}, "at least 1 item"),
    ],
)
def test_a_space_outside_the_training_params_is_refused(space: dict[str, Any], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        TuneParams.model_validate({"space": space})


def test_the_ranges_allowed_are_training_params_own_bounds() -> None:
    lr0 = TrainingParams.model_fields["lr0"]
    assert lr0.metadata  # the bound the check reads is this one, not a copy
    tune = TuneParams.model_validate(
        {
            "space": {
                "lr0": {"low": 1e-6, "high": 1.0, "log": True},
                "batch": {"low": 1, "high": 4096, "step": 1},
                "optimizer": {"choices": ["SGD", "AdamW"]},
            }
        }
    )
    assert set(tune.space) == {"lr0", "batch", "optimizer"}


def test_trials_parallel_and_base_are_bounded() -> None:
    with pytest.raises(ValidationError):
        _tune(trials=MAX_TRIALS + 1)
    with pytest.raises(ValidationError):
        _tune(parallel=0)
    with pytest.raises(ValidationError, match="base may not set epochs"):
        _tune(base={"epochs": 3})
    with pytest.raises(ValidationError, match="base may not set output_name"):
        _tune(base={"output_name": "mine"})


def test_a_trials_params_are_the_base_with_the_sampled_values_and_the_tunes_epochs() -> None:
    tune = _tune(epochs=3, base={"imgsz": 128, "lr0": 0.05, "optimizer": "SGD"})
    params = tune.trial_params({"lr0": 0.002}, "tune-abc-trial-0")
    assert params["lr0"] == 0.002
    assert (params["imgsz"], params["optimizer"], params["epochs"]) == (128, "SGD", 3)
    assert params["output_name"] == "tune-abc-trial-0"
    assert tune.baseline() == {"lr0": 0.05}


def test_stored_params_read_back_as_submitted() -> None:
    from yolo_orch.kinds.tune import TuneJobCreate

    request = TuneJobCreate.model_validate(
        {
            "kind": "tune",
            "model": "sim",
            "params": {
                "space": {"batch": {"low": 8, "high": 32, "step": 8}, "lr0": {"choices": [0.01]}},
                "base": {"sim_steps": 2},
            },
        }
    )
    stored = request.spec().params
    assert "epochs" not in stored["base"]
    assert TuneParams.from_job(stored) == request.params
