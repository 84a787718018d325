"""A promotion's gate (`domain.chains.decide`): a minimum, a direction, and no worse than the
alias's current model."""

from __future__ import annotations

from yolo_orch.domain.chains import Gate, decide


def test_a_minimum_passes_at_and_above_it_only() -> None:
    gate = Gate("mAP50", minimum=0.5)
    assert decide(gate, {"mAP50": 0.5}, None).passed
    failed = decide(gate, {"mAP50": 0.49}, None)
    assert not failed.passed
    assert failed.reasons == ("mAP50 0.49 is not at least 0.5",)
    assert failed.figures(gate)["candidate"] == 0.49


def test_not_worse_compares_with_the_baseline_when_there_is_one() -> None:
    gate = Gate("mAP50-95", not_worse=True)
    assert decide(gate, {"mAP50-95": 0.4}, {"mAP50-95": 0.4}).passed
    worse = decide(gate, {"mAP50-95": 0.39}, {"mAP50-95": 0.4})
    assert (worse.passed, worse.baseline) == (False, 0.4)
    assert decide(gate, {"mAP50-95": 0.1}, None).passed  # no model behind the alias yet


def test_lower_is_better_turns_both_comparisons() -> None:
    gate = Gate("abs_rel", minimum=0.2, higher_is_better=False, not_worse=True)
    assert decide(gate, {"abs_rel": 0.1}, {"abs_rel": 0.15}).passed
    failed = decide(gate, {"abs_rel": 0.3}, {"abs_rel": 0.25})
    assert failed.reasons == (
        "abs_rel 0.3 is not at most 0.2",
        "abs_rel 0.3 is worse than the current model's 0.25",
    )


def test_a_metric_the_validation_lacks_fails_the_gate() -> None:
    failed = decide(Gate("top1", minimum=0.1), {"mAP50": 0.9}, None)
    assert not failed.passed
    assert failed.reasons == ("the validation has no 'top1'",)
