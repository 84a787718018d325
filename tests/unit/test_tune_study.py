"""A tune's Optuna study rebuilt from the trials the store holds: finished ones as they ended,
running ones asked again with their params (to report to and tell), and the baseline first."""

from __future__ import annotations

from typing import Any

from optuna.trial import TrialState

from yolo_orch.jobs.tune_study import StoredTrial, contains, rebuild, search_space, tell
from yolo_orch.params.tune import SearchChoices, SearchRange, TuneParams


def _tune(**fields: Any) -> TuneParams:
    return TuneParams.model_validate(
        {
            "space": {
                "lr0": {"low": 0.001, "high": 0.1, "log": True},
                "optimizer": {"choices": ["SGD", "AdamW"]},
                "batch": {"low": 8, "high": 32, "step": 8},
            },
            "pruner": "median",
            "warmup_trials": 1,
            **fields,
        }
    )


def test_the_study_holds_the_stored_trials_in_order_and_asks_the_running_again() -> None:
    stored = [
        StoredTrial(
            {"lr0": 0.01, "optimizer": "SGD", "batch": 16}, {1: 0.2, 2: 0.4}, "complete", 0.4
        ),
        StoredTrial({"lr0": 0.002, "optimizer": "SGD", "batch": 8}, {1: 0.05}, "pruned"),
        StoredTrial({"lr0": 0.05, "optimizer": "AdamW", "batch": 32}, {}, "failed"),
        StoredTrial({"lr0": 0.03, "optimizer": "AdamW", "batch": 24}, {1: 0.3}, None),
    ]
    study, running = rebuild(_tune(), stored)

    trials = study.trials
    assert [t.state for t in trials] == [
        TrialState.COMPLETE,
        TrialState.PRUNED,
        TrialState.FAIL,
        TrialState.RUNNING,
    ]
    assert [t.params for t in trials] == [s.params for s in stored]
    assert trials[0].intermediate_values == {1: 0.2, 2: 0.4}
    assert trials[1].value == 0.05  # a pruned trial's value: its last epoch's
    assert len(running) == 1
    assert running[0].number == 3
    assert trials[3].intermediate_values == {1: 0.3}  # reported again, not lost

    tell(study, running[0], "complete", 0.6)
    assert study.best_trial.number == 3
    following = study.ask(search_space(_tune()))
    assert following.number == 4


def test_the_first_trial_of_a_new_study_is_the_baseline_where_it_lies_in_the_space() -> None:
    study, running = rebuild(_tune(base={"lr0": 0.02, "batch": 12}), [])
    assert running == []
    first = study.ask(search_space(_tune()))
    # lr0 and optimizer ("auto" is not a choice) as base has them where the space holds them;
    # batch 12 is off the step of 8, so it is sampled.
    assert first.params["lr0"] == 0.02
    assert first.params["batch"] in (8, 16, 24, 32)


def test_a_study_asks_the_same_params_for_the_same_seed() -> None:
    def first_three(seed: int) -> list[dict[str, Any]]:
        params = _tune(seed=seed, default_trial=False)
        study, _ = rebuild(params, [])
        return [study.ask(search_space(params)).params for _ in range(3)]

    assert first_three(7) == first_three(7)
    assert first_three(7) != first_three(8)


def test_contains_knows_ranges_steps_and_choices() -> None:
    assert contains(SearchRange(low=8, high=32, step=8), 24)
    assert not contains(SearchRange(low=8, high=32, step=8), 12)
    assert not contains(SearchRange(low=0.001, high=0.1), 0.5)
    assert contains(SearchChoices(choices=["SGD"]), "SGD")
    assert not contains(SearchChoices(choices=["SGD"]), "auto")
