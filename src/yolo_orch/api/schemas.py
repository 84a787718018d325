"""Request and response shapes of the HTTP API; separate from the domain and the tables."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from yolo_orch.domain import SIM_MODEL, Job, JobKind, JobState, NewJob
from yolo_orch.params.common import SIM_FIELDS, SimulatedParams
from yolo_orch.params.export import ExportParams
from yolo_orch.params.inference import InferenceParams
from yolo_orch.params.training import TrainingParams
from yolo_orch.params.validation import ValidationParams


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _JobCreateBase(_Strict):
    model: str = Field(min_length=1, max_length=200, description="A registered model (name or id).")
    priority: int = Field(default=0, ge=-100, le=100, description="Higher starts first.")

    @model_validator(mode="after")
    def _simulated_fields_need_sim_model(self) -> _JobCreateBase:
        params: SimulatedParams = getattr(self, "params")  # noqa: B009 - both subclasses have it
        used = [name for name in SIM_FIELDS if getattr(params, name) is not None]
        if used and self.model != SIM_MODEL:
            raise ValueError(f"{', '.join(used)} apply to model {SIM_MODEL!r} only")
        return self


class InferenceJobCreate(_JobCreateBase):
    kind: Literal["inference"]
    inputs: list[Annotated[str, Field(min_length=1, max_length=4096)]] = Field(
        min_length=1,
        max_length=10_000,
        description="Image or video paths relative to a data root; globs allowed.",
    )
    params: InferenceParams = Field(default_factory=InferenceParams)

    def to_new_job(self, max_attempts: int, idempotency_key: str | None) -> NewJob:
        spec = {"inputs": self.inputs, "params": self.params.model_dump(exclude_none=True)}
        return _new_job(self, JobKind.INFERENCE, spec, 1, max_attempts, idempotency_key)


class TrainingJobCreate(_JobCreateBase):
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
        description="A data.yaml under a data root (an image folder for classify models); not "
        "needed by the simulated model.",
    )
    gpus: int = Field(default=1, ge=1, le=64, description="Lanes to hold for the whole run.")
    params: TrainingParams = Field(default_factory=TrainingParams)

    @model_validator(mode="after")
    def _dataset_required(self) -> TrainingJobCreate:
        if self.dataset is None and self.model != SIM_MODEL:
            raise ValueError("dataset is required")
        return self

    def to_new_job(self, max_attempts: int, idempotency_key: str | None) -> NewJob:
        spec: dict[str, Any] = {"params": self.params.model_dump(exclude_none=True)}
        if self.dataset is not None:
            spec["dataset"] = self.dataset
        return _new_job(self, JobKind.TRAINING, spec, self.gpus, max_attempts, idempotency_key)


class ExportJobCreate(_JobCreateBase):
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

    def to_new_job(self, max_attempts: int, idempotency_key: str | None) -> NewJob:
        spec: dict[str, Any] = {"params": self.params.model_dump(mode="json", exclude_none=True)}
        if self.dataset is not None:
            spec["dataset"] = self.dataset
        return _new_job(self, JobKind.EXPORT, spec, 1, max_attempts, idempotency_key)


class ValidationJobCreate(_JobCreateBase):
    kind: Literal["validation"]
    dataset: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        description="A data.yaml (an image folder for classify models) under a data root; not "
        "needed by the simulated model.",
    )
    split: Literal["val", "test"] = Field(default="val", description="The split to score.")
    params: ValidationParams = Field(default_factory=ValidationParams)

    @model_validator(mode="after")
    def _dataset_required(self) -> ValidationJobCreate:
        if self.dataset is None and self.model != SIM_MODEL:
            raise ValueError("dataset is required")
        return self

    def to_new_job(self, max_attempts: int, idempotency_key: str | None) -> NewJob:
        spec: dict[str, Any] = {
            "split": self.split,
            "params": self.params.model_dump(exclude_none=True),
        }
        if self.dataset is not None:
            spec["dataset"] = self.dataset
        return _new_job(self, JobKind.VALIDATION, spec, 1, max_attempts, idempotency_key)


JobCreate = Annotated[
    InferenceJobCreate | TrainingJobCreate | ValidationJobCreate | ExportJobCreate,
    Field(discriminator="kind"),
]


def _new_job(
    request: _JobCreateBase,
    kind: JobKind,
    spec: dict[str, Any],
    gpus: int,
    max_attempts: int,
    idempotency_key: str | None,
) -> NewJob:
    canonical = json.dumps(request.model_dump(mode="json"), sort_keys=True)
    return NewJob(
        kind=kind,
        model=request.model,
        spec=spec,
        priority=request.priority,
        gpus=gpus,
        max_attempts=max_attempts,
        idempotency_key=idempotency_key,
        request_fingerprint=hashlib.sha256(canonical.encode()).hexdigest(),
    )


class ProgressPublic(BaseModel):
    done: int
    total: int
    unit: str
    detail: dict[str, Any] | None = Field(
        default=None,
        description="Training: epoch, epochs, batch, batches and the running losses; export: "
        "`stage`; video inference: `frame_count` (`declared` or `estimated`).",
    )


class ErrorPublic(BaseModel):
    code: str
    message: str


class JobPublic(BaseModel):
    id: str
    kind: JobKind
    state: JobState
    model: str
    inputs: list[str] | None = None
    dataset: str | None = None
    split: str | None = Field(default=None, description="Validation: the split scored.")
    params: dict[str, Any]
    priority: int
    gpus: int
    devices: list[str]
    attempt: int
    max_attempts: int
    cancel_requested: bool
    progress: ProgressPublic | None
    error: ErrorPublic | None
    result: dict[str, Any] | None = Field(
        description="A summary; GET /v1/jobs/{id}/result has the full result."
    )
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def of(cls, job: Job) -> JobPublic:
        return cls(
            id=job.id,
            kind=job.kind,
            state=job.state,
            model=job.model,
            inputs=job.spec.get("inputs"),
            dataset=job.spec.get("dataset"),
            split=job.spec.get("split"),
            params=job.params,
            priority=job.priority,
            gpus=job.gpus,
            devices=list(job.devices),
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            cancel_requested=job.cancel_requested,
            progress=ProgressPublic(**job.progress.as_dict()) if job.progress else None,
            error=ErrorPublic(code=job.error.code, message=job.error.message)
            if job.error
            else None,
            result=job.result,
            created_at=job.created_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
        )


class JobList(BaseModel):
    jobs: list[JobPublic]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next (older) page.")


class Health(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    status: Literal["ready", "degraded", "not_ready"]
    checks: dict[str, bool]
