"""Tune job parameters: a search space over training params, the trials, and how they are
sampled and pruned. Each range or choice is checked against `TrainingParams`' own bounds by
validating it with that model: the bounds are defined once, there."""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import Field, ValidationError, model_validator

from yolo_orch.params.common import SIM_FIELDS, JobParams, StrictParams
from yolo_orch.params.training import TrainingParams

MAX_TRIALS = 200
MAX_PARALLEL = 64

NOT_SEARCHED = frozenset({"epochs", "output_name", "export", "timeout_s", "workers", *SIM_FIELDS})
"""Training params a search may not vary: the tune sets `epochs` and names each trial's model;
the others say how a job runs, not what it learns."""
SET_BY_TUNE = frozenset({"epochs", "output_name", "export"})
"""Training params `base` may not hold: the tune's `epochs` is each trial's, each trial's model
is named by the tune, and a trial exports nothing (export the best with an export job)."""


class SearchRange(StrictParams):
    """Numbers from `low` to `high` (both included): integers for an integer param."""

    low: float
    high: float
    log: bool = Field(default=False, description="Sampled on a log scale (low > 0).")
    step: float | None = Field(default=None, gt=0, description="Only multiples of it from low.")

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.low > self.high:
            raise ValueError("low is above high")
        if self.log and self.step is not None:
            raise ValueError("a range is either on a log scale or stepped, not both")
        if self.log and self.low <= 0:
            raise ValueError("a log scale needs low > 0")
        return self


class SearchChoices(StrictParams):
    choices: list[int | float | str | bool] = Field(min_length=1, max_length=32)


SearchDimension = SearchRange | SearchChoices


class TuneParams(JobParams):
    space: dict[str, SearchDimension] = Field(
        min_length=1,
        max_length=16,
        description="Training param name -> `{low, high, log?, step?}` or `{choices: [...]}`; "
        "only params a training takes (lr0, batch, imgsz, optimizer, patience, seed), within "
        "its own bounds.",
    )
    trials: int = Field(default=20, ge=1, le=MAX_TRIALS)
    parallel: int | None = Field(
        default=None,
        ge=1,
        le=MAX_PARALLEL,
        description="Trials queued or running at once (default: the server's job slots, "
        "the lanes times `slots_per_lane`).",
    )
    epochs: int = Field(default=10, ge=1, le=10_000, description="Each trial's epochs.")
    objective: str = Field(
        default="mAP50-95",
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="The validation score to maximize, as a training's result names it "
        "(`mAP50-95`, `mAP50`, `mask_mAP50-95`, `top1`, ...).",
    )
    sampler: Literal["tpe"] = "tpe"
    seed: int = Field(default=0, ge=0, le=2**31 - 1, description="The sampler's seed.")
    pruner: Literal["none", "median", "successive_halving"] = "median"
    warmup_trials: int = Field(
        default=5,
        ge=0,
        le=MAX_TRIALS,
        description="Trials that complete before any is pruned, and that the sampler picks at "
        "random before it models the space.",
    )
    warmup_epochs: int = Field(
        default=1, ge=1, le=10_000, description="Epochs a trial runs before it may be pruned."
    )
    default_trial: bool = Field(
        default=True,
        description="The first trial trains with `base` as given (each searched param at its "
        "value there, or its default, where that lies in the space): the tune's baseline.",
    )
    base: TrainingParams = Field(
        default_factory=TrainingParams,
        description="Training params of every trial, the searched ones replaced by each "
        "trial's (not `epochs`, `output_name` or `export`).",
    )

    @model_validator(mode="after")
    def _space_within_training(self) -> Self:
        problems = [
            problem
            for name, dimension in self.space.items()
            if (problem := _dimension_problem(name, dimension)) is not None
        ]
        if set_here := sorted(SET_BY_TUNE & self.base.model_fields_set):
            problems.append(f"base may not set {', '.join(set_here)}: the tune sets them")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def trial_params(self, sampled: dict[str, Any], output_name: str | None) -> dict[str, Any]:
        """A trial's training params: `base` with `sampled` and the tune's epochs, validated as
        a training's are at submission."""
        values = {**self.base.model_dump(exclude_none=True), **sampled, "epochs": self.epochs}
        if output_name is not None:
            values["output_name"] = output_name
        return TrainingParams.model_validate(values).model_dump(exclude_none=True)

    def baseline(self) -> dict[str, Any]:
        """The searched params' values in `base` (its defaults where unset)."""
        return {name: getattr(self.base, name) for name in self.space}


def is_integer_param(name: str) -> bool:
    return TrainingParams.model_fields[name].annotation is int


def _dimension_problem(name: str, dimension: SearchDimension) -> str | None:
    if name not in TrainingParams.model_fields or name in NOT_SEARCHED:
        return f"space.{name}: not a training param a search may vary"
    if isinstance(dimension, SearchChoices):
        values: list[Any] = list(dimension.choices)
    else:
        if is_integer_param(name) and not all(
            float(v).is_integer() for v in (dimension.low, dimension.high, dimension.step or 1)
        ):
            return f"space.{name}: an integer param's low, high and step are integers"
        values = [dimension.low, dimension.high]
        if is_integer_param(name):
            values = [int(v) for v in values]
    for value in values:
        try:
            TrainingParams.model_validate({name: value})
        except ValidationError as e:
            return f"space.{name}: {value!r} is not a valid {name} ({e.errors()[0]['msg']})"
    return None
