"""Export: a registered .pt model built into another format (ONNX, OpenVINO, TorchScript,
TensorRT), registered as a variant of that model."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from yolo_orch.domain import SIM_MODEL, JobKind
from yolo_orch.domain.results import ExportResultDetail
from yolo_orch.domain.specs import ExportSpec
from yolo_orch.domain.variants import ExportFormat
from yolo_orch.kinds.base import JobRequest, Kind
from yolo_orch.kinds.submission import Submission, SubmissionChecks
from yolo_orch.params.export import ExportParams


class ExportJobCreate(JobRequest):
    kind: Literal["export"]
    model: str = Field(
        min_length=1, max_length=200, description="The registered .pt model to export."
    )
    dataset: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        description="int8 only: a data.yaml under a data root to calibrate on.",
    )
    params: ExportParams

    @model_validator(mode="after")
    def _dataset_for_int8_only(self) -> ExportJobCreate:
        if self.params.int8 != (self.dataset is not None) and self.model != SIM_MODEL:
            raise ValueError("int8 needs a calibration dataset, and a dataset is for int8 only")
        return self

    def spec(self) -> ExportSpec:
        params = self.params.model_dump(mode="json", exclude_none=True)
        return ExportSpec(dataset=self.dataset, params=params)


async def _checked(submission: Submission[ExportSpec], checks: SubmissionChecks) -> ExportSpec:
    """This host can build the format; int8's calibration dataset fits the model's task."""
    spec = submission.spec
    checks.buildable(ExportFormat(spec.params["format"]), half=spec.params["half"])
    if spec.dataset is None:
        return spec
    path = await checks.dataset(spec.dataset, None, submission.task)
    return spec.model_copy(update={"dataset_path": path})


EXPORT = Kind(
    name=JobKind.EXPORT,
    params=ExportParams,
    request=ExportJobCreate,
    result=ExportResultDetail,
    checked=_checked,
)
