"""Validation: a model's metrics on a split of a dataset under a data root."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from yolo_orch.domain import SIM_MODEL, JobKind
from yolo_orch.domain.results import ValidationResultDetail
from yolo_orch.domain.specs import ValidationSpec
from yolo_orch.kinds.base import JobRequest, Kind
from yolo_orch.kinds.submission import Submission, SubmissionChecks
from yolo_orch.params.validation import ValidationParams


class ValidationJobCreate(JobRequest):
    kind: Literal["validation"]
    dataset: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        description="A data.yaml (an image folder for classify models) under a data root, or "
        "`dataset:<name>`, a managed dataset of the model's task (/v1/datasets); not needed "
        "by the simulated model.",
    )
    split: Literal["val", "test"] = Field(default="val", description="The split to score.")
    params: ValidationParams = Field(default_factory=ValidationParams)

    @model_validator(mode="after")
    def _dataset_required(self) -> ValidationJobCreate:
        if self.dataset is None and self.model != SIM_MODEL:
            raise ValueError("dataset is required")
        return self

    def spec(self) -> ValidationSpec:
        return ValidationSpec(
            dataset=self.dataset,
            split=self.split,
            params=self.params.model_dump(exclude_none=True),
        )


async def _checked(
    submission: Submission[ValidationSpec], checks: SubmissionChecks
) -> ValidationSpec:
    """The dataset fits the model's task and has the split to score."""
    spec = submission.spec
    if submission.simulated:
        return spec.model_copy(
            update={"dataset_path": await checks.simulated_dataset(spec.dataset)}
        )
    path = await checks.dataset(spec.dataset, spec.split, submission.task)
    return spec.model_copy(update={"dataset_path": path})


VALIDATION = Kind(
    name=JobKind.VALIDATION,
    params=ValidationParams,
    request=ValidationJobCreate,
    result=ValidationResultDetail,
    checked=_checked,
)
