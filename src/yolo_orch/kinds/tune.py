"""Tune: a search over training params. Each trial is a training job of its own (a child of the
tune job, in its chain), admitted onto lanes like any; the tune itself runs on the server,
holding no lane, and asks Optuna for the next trial's params (`jobs/tune.py`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from pydantic import Field, model_validator

from yolo_orch.domain import SIM_MODEL, JobKind, NewJob
from yolo_orch.domain.specs import TuneSpec
from yolo_orch.domain.tune_results import TuneResultDetail
from yolo_orch.kinds.base import JobRequest, Kind
from yolo_orch.kinds.submission import Submission, SubmissionChecks
from yolo_orch.params.chains import ThenSteps
from yolo_orch.params.common import SIM_FIELDS
from yolo_orch.params.tune import SET_BY_TUNE, TuneParams


class TuneJobCreate(JobRequest):
    kind: Literal["tune"]
    model: str = Field(
        min_length=1,
        max_length=200,
        description="The model each trial trains: a registered model to fine-tune, or a "
        "shipped architecture (yolo11n.yaml, ...).",
    )
    dataset: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        description="As a training's: a data.yaml under a data root, or `dataset:<name>`.",
    )
    params: TuneParams
    then: ThenSteps | None = Field(
        default=None,
        description="Steps to run as jobs of their own once the tune succeeds, on its best "
        "trial's model: validate, export, promote (gated), as a training's `then`.",
    )

    @model_validator(mode="after")
    def _dataset_required(self) -> TuneJobCreate:
        if self.dataset is None and self.model != SIM_MODEL:
            raise ValueError("dataset is required")
        return self

    @model_validator(mode="after")
    def _trials_simulated_fields_need_sim_model(self) -> TuneJobCreate:
        used = [name for name in SIM_FIELDS if getattr(self.params.base, name) is not None]
        if used and self.model != SIM_MODEL:
            raise ValueError(f"base {', '.join(used)} apply to model {SIM_MODEL!r} only")
        return self

    def spec(self) -> TuneSpec:
        # `base` without what the tune sets: stored, it reads back as a submission would.
        params = self.params.model_dump(
            mode="json", exclude_none=True, exclude={"base": set(SET_BY_TUNE)}
        )
        return TuneSpec(dataset=self.dataset, params=params)

    def steps(self) -> ThenSteps | None:
        return self.then

    def to_new_job(self, max_attempts: int, idempotency_key: str | None) -> NewJob:
        # The tune heads its trials' chain: GET /v1/chains/{id} and ?chain= list them with it.
        new = super().to_new_job(max_attempts, idempotency_key)
        return replace(new, chain_id=new.id)


async def _checked(submission: Submission[TuneSpec], checks: SubmissionChecks) -> TuneSpec:
    """The dataset fits the model's task, as a training checks it (each trial's training is
    checked again when the tune submits it)."""
    spec = submission.spec
    if submission.simulated:
        return spec.model_copy(
            update={"dataset_path": await checks.simulated_dataset(spec.dataset)}
        )
    path = await checks.dataset(spec.dataset, None, submission.task)
    return spec.model_copy(update={"dataset_path": path})


TUNE = Kind(
    name=JobKind.TUNE,
    params=TuneParams,
    request=TuneJobCreate,
    result=TuneResultDetail,
    checked=_checked,
    on_head=True,
    resumes=True,
)
