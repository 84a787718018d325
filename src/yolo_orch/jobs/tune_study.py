"""The Optuna side of a tune job: its search space as Optuna's distributions, a study with the
tune's sampler and pruner, and that study rebuilt from the trials the store holds (each a
training job) so that a restart goes on where the search was. Optuna keeps nothing of its own:
its in-memory storage is filled anew from our store at each start."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import Trial, TrialState, create_trial

from yolo_orch.domain.tune_results import TrialState as Ended
from yolo_orch.params.tune import SearchChoices, SearchDimension, TuneParams, is_integer_param

optuna.logging.set_verbosity(optuna.logging.WARNING)  # the job's log says what matters


@dataclass(frozen=True)
class StoredTrial:
    """A trial as the store holds it: its training's params, per-epoch scores and end."""

    params: dict[str, Any]
    """The searched params, as the training job got them."""
    intermediate: Mapping[int, float]
    """The objective after each epoch so far."""
    ended: Ended | None
    """None: its training is queued or running."""
    value: float | None = None
    """A complete trial's objective."""


def search_space(params: TuneParams) -> dict[str, BaseDistribution]:
    return {name: _distribution(name, dim) for name, dim in params.space.items()}


def _distribution(name: str, dim: SearchDimension) -> BaseDistribution:
    if isinstance(dim, SearchChoices):
        return CategoricalDistribution(dim.choices)
    if is_integer_param(name):
        step = 1 if dim.step is None else int(dim.step)
        return IntDistribution(int(dim.low), int(dim.high), log=dim.log, step=step)
    return FloatDistribution(dim.low, dim.high, log=dim.log, step=dim.step)


def new_study(params: TuneParams) -> optuna.Study:
    """Maximizes the objective: TPE seeded with `params.seed`, random until `warmup_trials`."""
    sampler = optuna.samplers.TPESampler(seed=params.seed, n_startup_trials=params.warmup_trials)
    pruner: optuna.pruners.BasePruner
    if params.pruner == "median":
        pruner = optuna.pruners.MedianPruner(
            n_startup_trials=params.warmup_trials, n_warmup_steps=params.warmup_epochs
        )
    elif params.pruner == "successive_halving":
        pruner = optuna.pruners.SuccessiveHalvingPruner(
            min_resource=params.warmup_epochs, reduction_factor=3
        )
    else:
        pruner = optuna.pruners.NopPruner()
    return optuna.create_study(direction="maximize", sampler=sampler, pruner=pruner)


def rebuild(params: TuneParams, stored: list[StoredTrial]) -> tuple[optuna.Study, list[Trial]]:
    """A study holding `stored` in order (trial n is the n-th), and the trials still running,
    asked again with the params their trainings run, to report their epochs to and tell their
    ends. With none stored and `default_trial`, the first trial asked will be the baseline."""
    study = new_study(params)
    space = search_space(params)
    active: list[Trial] = []
    for trial in stored:
        if trial.ended is None:
            study.enqueue_trial(trial.params)
            asked = study.ask(space)
            for epoch, score in sorted(trial.intermediate.items()):
                asked.report(score, epoch)
            active.append(asked)
            continue
        state, final = _ended_as(trial)
        study.add_trial(
            create_trial(
                params=trial.params,
                distributions=space,
                value=final,
                intermediate_values=dict(trial.intermediate),
                state=state,
            )
        )
    if not stored and params.default_trial:
        baseline = {
            name: value
            for name, value in params.baseline().items()
            if contains(params.space[name], value)
        }
        if baseline:
            study.enqueue_trial(baseline)
    return study, active


def tell(study: optuna.Study, trial: Trial, ended: Ended, value: float | None) -> None:
    """Optuna hears how a trial ended: a pruned one with its last epoch's value; a failed one,
    or one cancelled by someone else than the pruner, as failed (the sampler skips it)."""
    if ended == "complete":
        study.tell(trial, value)
    elif ended == "pruned":
        study.tell(trial, state=TrialState.PRUNED)
    else:
        study.tell(trial, state=TrialState.FAIL)


def _ended_as(trial: StoredTrial) -> tuple[TrialState, float | None]:
    if trial.ended == "complete" and trial.value is not None:
        return TrialState.COMPLETE, trial.value
    if trial.ended == "pruned":
        last = max(trial.intermediate, default=None)
        return TrialState.PRUNED, None if last is None else trial.intermediate[last]
    return TrialState.FAIL, None  # failed, cancelled by someone else, or scored nothing


def contains(dim: SearchDimension, value: Any) -> bool:
    """Whether `value` is one the dimension can give (the baseline's may not be)."""
    if isinstance(dim, SearchChoices):
        return value in dim.choices
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if not dim.low <= value <= dim.high:
        return False
    if dim.step is None:
        return True
    steps = (value - dim.low) / dim.step
    return math.isclose(steps, round(steps), abs_tol=1e-9)
