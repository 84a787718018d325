"""The typed answers of the Python client.

Jobs and results are the API's own pydantic models (`yolo_orch.api.schemas`, `api.results`):
those modules import pydantic and the job parameters, not the server. The registry's and the
devices' models are declared beside their FastAPI routes, so importing them would pull in the
server; their shapes are repeated here, and allow fields a newer server adds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from yolo_orch.api.results import (
    ExportResultDetail,
    ImageResult,
    InferenceResultDetail,
    JobResultDetail,
    TrainingResultDetail,
    ValidationResultDetail,
)
from yolo_orch.api.schemas import ErrorPublic as JobError
from yolo_orch.api.schemas import JobList
from yolo_orch.api.schemas import JobPublic as Job
from yolo_orch.api.schemas import ProgressPublic as Progress
from yolo_orch.domain import JobKind, JobState

__all__ = [
    "Artifact",
    "Devices",
    "ExportResultDetail",
    "ImageResult",
    "InferenceResultDetail",
    "Job",
    "JobError",
    "JobEvent",
    "JobKind",
    "JobList",
    "JobResultDetail",
    "JobState",
    "Lane",
    "Lineage",
    "Model",
    "ModelDetail",
    "Node",
    "Progress",
    "TrainingResultDetail",
    "ValidationResultDetail",
    "Variant",
]


class _Answer(BaseModel):
    model_config = ConfigDict(extra="allow")


class Model(_Answer):
    id: str
    name: str
    sha256: str
    size_bytes: int
    task: str
    class_names: list[str]
    source: str
    created_at: datetime
    usable: bool = True


class Lineage(_Answer):
    source_sha256: str = ""
    imgsz: int
    half: bool
    int8: bool
    dynamic: bool
    batch: int
    device: str | None = None


class Variant(_Answer):
    id: str
    model_id: str
    format: str
    sha256: str
    size_bytes: int
    files: dict[str, str]
    lineage: Lineage
    source: str
    created_at: datetime
    usable: bool = True
    unusable_reason: str | None = None


class ModelDetail(Model):
    variants: list[Variant] = Field(default_factory=list)


class Lane(_Answer):
    id: str
    slots: int = 1
    busy: int = 0
    jobs: list[str] = Field(default_factory=list)
    models: list[str] = Field(default_factory=list)
    batch_sizes: dict[int, int] = Field(default_factory=dict)
    healthy: bool = True
    wedged: bool = False
    device_name: str | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    utilization_percent: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None


class Node(_Answer):
    name: str
    address: str
    lanes: list[str] = Field(default_factory=list)
    models: list[str] = Field(default_factory=list)


class Devices(_Answer):
    runtime: str
    devices: list[Lane]
    nodes: list[Node] | None = None


class Artifact(_Answer):
    name: str
    size_bytes: int
    url: str


@dataclass(frozen=True)
class JobEvent:
    """One event of a job's stream: `state` when its state changed, else `progress`."""

    id: str | None
    event: str
    job: Job


IMAGE_RESULT: TypeAdapter[Any] = TypeAdapter(ImageResult)
"""Validates one entry of an inference result (any task's image, a video, an unreadable one)."""
