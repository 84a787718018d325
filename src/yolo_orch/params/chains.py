"""What a training's `then` may ask (the steps of its chain) and a promotion's gate: one
definition the API schema, the job service and the promote step read."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from yolo_orch.domain.aliases import ALIAS_REF_PATTERN
from yolo_orch.domain.chains import Gate
from yolo_orch.params.common import JobParams, StrictParams
from yolo_orch.params.export import ExportFormatParam
from yolo_orch.params.validation import ValidationParams


class GateParams(StrictParams):
    metric: str = Field(
        default="mAP50-95",
        min_length=1,
        max_length=64,
        description="A metric of the validation (`mAP50-95`, `mAP50`, `top1`, `mIoU`, ...).",
    )
    min: float | None = Field(
        default=None, description="The least the new model must score (the most, for `lower`)."
    )
    better: Literal["higher", "lower"] = Field(
        default="higher", description="Which way the metric improves."
    )
    not_worse: bool = Field(
        default=False,
        description="Also validate the alias's current model on the same split, in the chain, "
        "and promote only if the new one scores no worse.",
    )

    def gate(self) -> Gate:
        return Gate(self.metric, self.min, self.better == "higher", self.not_worse)


class PromoteParams(JobParams):
    gate: GateParams | None = Field(
        default=None, description="None: promote whatever the validation scored."
    )


class ValidateStep(StrictParams):
    dataset: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        description="A data.yaml under a data root; default: the training's.",
    )
    split: Literal["val", "test"] = "val"
    params: ValidationParams = Field(default_factory=ValidationParams)


class ExportStep(StrictParams):
    formats: list[ExportFormatParam] = Field(
        min_length=1, max_length=4, description="One export job per format."
    )


class PromoteStep(StrictParams):
    alias: str = Field(
        pattern=ALIAS_REF_PATTERN,
        max_length=264,
        description="`name@alias` to move to the trained model if the gate passes.",
    )
    gate: GateParams | None = None


class ThenSteps(StrictParams):
    """The steps a training starts once it succeeds, each a job of its own, in this order:
    validate, export, then promote."""

    validate_: ValidateStep | None = Field(default=None, alias="validate")
    export: ExportStep | None = None
    promote: PromoteStep | None = None

    @model_validator(mode="after")
    def _gate_needs_validation(self) -> ThenSteps:
        if self.promote is not None and self.promote.gate is not None and self.validate_ is None:
            raise ValueError("a promotion's gate needs a validate step to score the model")
        if self.validate_ is None and self.export is None and self.promote is None:
            raise ValueError("then: name at least one step (validate, export, promote)")
        return self
