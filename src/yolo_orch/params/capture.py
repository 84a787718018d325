"""`capture` on inference and stream jobs: which of a job's images (or frames) are stored, with
the model's predictions as their labels, into a managed dataset, and how many at most.

The rule itself (`labelling.capture_rule`) and where the images go (`runners.dataset_capture`)
read these; docs/capture.md tells what each condition selects."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from yolo_orch.domain.managed_datasets import DATASET_NAME_MAX_LENGTH, DATASET_NAME_PATTERN
from yolo_orch.params.common import MAX_CLASS_ID, StrictParams

MAX_CAPTURE_TOTAL = 1_000_000


class CaptureWhen(StrictParams):
    """When an image is selected: when any condition given holds. `classes`, `conf_below` and
    `conf_above` make one condition together: some detection (of `classes`, when given) whose
    confidence is below `conf_below` and at least `conf_above` (each bound only when given)."""

    conf_below: float | None = Field(
        default=None, gt=0, le=1, description="A detection less sure than this selects its image."
    )
    conf_above: float | None = Field(
        default=None, ge=0, lt=1, description="... and at least this sure (with `conf_below`)."
    )
    classes: list[Annotated[int, Field(ge=0, le=MAX_CLASS_ID)]] | None = Field(
        default=None,
        min_length=1,
        max_length=10_000,
        description="Class ids of the model: only their detections count (classify: the top "
        "class).",
    )
    no_detections: bool = Field(
        default=False, description="An image without any detection is selected."
    )
    every_n: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="The 1st, (n+1)th, (2n+1)th ... image of the job (streams: of each source) "
        "is selected.",
    )

    @model_validator(mode="after")
    def _some_condition(self) -> CaptureWhen:
        detection_test = self.classes or self.conf_below is not None or self.conf_above is not None
        if not (detection_test or self.no_detections or self.every_n is not None):
            raise ValueError(
                "capture.when needs a condition: conf_below, conf_above, classes, "
                "no_detections or every_n"
            )
        below, above = self.conf_below, self.conf_above
        if below is not None and above is not None and above >= below:
            raise ValueError("capture.when.conf_above must be below conf_below")
        return self


class CaptureParams(StrictParams):
    into: str = Field(
        min_length=1,
        max_length=DATASET_NAME_MAX_LENGTH,
        pattern=DATASET_NAME_PATTERN,
        description="The managed dataset the images go into (GET /v1/datasets); its task must "
        "be the model's.",
    )
    when: CaptureWhen
    max_total: int = Field(
        default=1000,
        ge=1,
        le=MAX_CAPTURE_TOTAL,
        description="Images this job captures at most; selected images past it are `capped`.",
    )
    max_per_hour: int | None = Field(
        default=None,
        ge=1,
        le=MAX_CAPTURE_TOTAL,
        description="Images this job captures in any hour (a sliding window), at most.",
    )
