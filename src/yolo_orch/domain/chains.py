"""Jobs that wait for others: dependencies (`after`, `after_ok`), chains of steps a training
starts (`then`), and unique keys. Plain values: the store keeps them, the dispatcher obeys."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dependency:
    """A job another waits for: it stays queued, unstartable, until `job_id` has ended; with
    `ok_only` (`after_ok`), it is cancelled (`dependency_failed`) unless that job succeeded."""

    job_id: str
    ok_only: bool = False

    def released_by(self, succeeded: bool) -> bool:
        """Whether the end of `job_id` (`succeeded` or not) lets the waiting job go on, rather
        than cancel it."""
        return succeeded or not self.ok_only


MAX_DEPENDENCIES = 32
"""How many jobs one job may wait for: a bound on the work one submission's check costs."""

PRODUCED_BY = "job:"
"""A model reference that means the model a job produced (`job:<id>`): the steps of a chain
name their training's model so, before it exists; it resolves when the step starts."""


def produced_by(job_id: str) -> str:
    return f"{PRODUCED_BY}{job_id}"


def producer_of(model_ref: str) -> str | None:
    """The job id of a `job:<id>` reference; None for any other reference."""
    return model_ref[len(PRODUCED_BY) :] if model_ref.startswith(PRODUCED_BY) else None


@dataclass(frozen=True)
class Gate:
    """What a promotion asks of the new model's validation: `metric` at least `minimum` (at
    most, when lower is better), and, with `not_worse`, no worse than the alias's current
    model scored on the same split in the same chain."""

    metric: str
    minimum: float | None = None
    higher_is_better: bool = True
    not_worse: bool = False


@dataclass(frozen=True)
class GateDecision:
    passed: bool
    candidate: float | None
    baseline: float | None
    reasons: tuple[str, ...]
    """Why it failed (empty when it passed)."""

    def figures(self, gate: Gate) -> dict[str, object]:
        """The figures that decided it, as the promotion's result shows them."""
        return {
            "metric": gate.metric,
            "min": gate.minimum,
            "better": "higher" if gate.higher_is_better else "lower",
            "not_worse": gate.not_worse,
            "candidate": self.candidate,
            "baseline": self.baseline,
            "passed": self.passed,
            "reasons": list(self.reasons),
        }


def decide(
    gate: Gate,
    candidate: dict[str, float | None],
    baseline: dict[str, float | None] | None,
) -> GateDecision:
    """Whether the candidate's metrics pass `gate`. `baseline`: the alias's current model's
    metrics, None when the alias points nowhere yet (nothing to be worse than)."""
    value = candidate.get(gate.metric)
    before = None if baseline is None else baseline.get(gate.metric)
    reasons = []
    if value is None:
        reasons.append(f"the validation has no {gate.metric!r}")
    else:
        if gate.minimum is not None and not _at_least(value, gate.minimum, gate):
            bound = "at least" if gate.higher_is_better else "at most"
            reasons.append(f"{gate.metric} {value:g} is not {bound} {gate.minimum:g}")
        if gate.not_worse and before is not None and not _at_least(value, before, gate):
            reasons.append(f"{gate.metric} {value:g} is worse than the current model's {before:g}")
    return GateDecision(not reasons, value, before, tuple(reasons))


def _at_least(value: float, bound: float, gate: Gate) -> bool:
    return value >= bound if gate.higher_is_better else value <= bound
