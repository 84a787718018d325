"""Training: a model fine-tuned (or a shipped architecture trained from scratch) on a dataset under
a data root, registered under `params.output_name`, optionally exported to `params.export` in the
same job."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from yolo_orch.domain import SIM_MODEL, JobKind
from yolo_orch.domain.results import TrainingResultDetail
from yolo_orch.domain.specs import TrainingSpec
from yolo_orch.domain.variants import ExportFormat
from yolo_orch.kinds.base import JobRequest, Kind
from yolo_orch.kinds.submission import Submission, SubmissionChecks
from yolo_orch.params.chains import ThenSteps
from yolo_orch.params.training import TrainingParams


class TrainingJobCreate(JobRequest):
    kind: Literal["training"]
    model: str = Field(
        min_length=1,
        max_length=200,
        description="A registered model to fine-tune, or a shipped architecture of any task "
        "(yolo11n.yaml, yolo11n-seg.yaml, yolo11n-cls.yaml, ...).",
    )
    dataset: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        description="A data.yaml under a data root (an image folder for classify models), or "
        "`dataset:<name>`, a managed dataset of the model's task (/v1/datasets); not needed "
        "by the simulated model.",
    )
    gpus: int = Field(default=1, ge=1, le=64, description="Lanes to hold for the whole run.")
    params: TrainingParams = Field(default_factory=TrainingParams)
    then: ThenSteps | None = Field(
        default=None,
        description="Steps to run as jobs of their own once the training succeeds: validate, "
        "export, promote (gated). They are stored with the training, as its chain.",
    )

    @model_validator(mode="after")
    def _dataset_required(self) -> TrainingJobCreate:
        if self.dataset is None and self.model != SIM_MODEL:
            raise ValueError("dataset is required")
        return self

    def spec(self) -> TrainingSpec:
        return TrainingSpec(dataset=self.dataset, params=self.params.model_dump(exclude_none=True))

    def lanes(self) -> int:
        return self.gpus

    def steps(self) -> ThenSteps | None:
        return self.then


async def _checked(submission: Submission[TrainingSpec], checks: SubmissionChecks) -> TrainingSpec:
    """The dataset fits the model's task, the produced model's name is free, and each export
    asked for can be built here."""
    spec = submission.spec
    if submission.simulated:
        return spec.model_copy(
            update={"dataset_path": await checks.simulated_dataset(spec.dataset)}
        )
    path = await checks.dataset(spec.dataset, None, submission.task)
    await checks.output_name_free(spec.params.get("output_name"))
    for export_format in spec.params.get("export", []):
        checks.buildable(ExportFormat(export_format), half=False)
    return spec.model_copy(update={"dataset_path": path})


TRAINING = Kind(
    name=JobKind.TRAINING,
    params=TrainingParams,
    request=TrainingJobCreate,
    result=TrainingResultDetail,
    checked=_checked,
)
