"""The typed answers of the Python client.

Every answer is read with the API's own pydantic models (`yolo_orch.api.schemas`, `results`,
`model_schemas`, `device_schemas`): those modules import pydantic and plain values, never the
server, and ignore fields a newer server adds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter

from yolo_orch.api.device_schemas import DeviceList as Devices
from yolo_orch.api.device_schemas import LanePublic as Lane
from yolo_orch.api.device_schemas import NodePublic as Node
from yolo_orch.api.model_schemas import LineagePublic as Lineage
from yolo_orch.api.model_schemas import ModelDetail
from yolo_orch.api.model_schemas import ModelPublic as Model
from yolo_orch.api.model_schemas import VariantPublic as Variant
from yolo_orch.api.schemas import ChainPublic as Chain
from yolo_orch.api.schemas import ErrorPublic as JobError
from yolo_orch.api.schemas import JobList
from yolo_orch.api.schemas import JobPublic as Job
from yolo_orch.api.schemas import ProgressPublic as Progress
from yolo_orch.domain import JobKind, JobState
from yolo_orch.domain.results import (
    ExportResultDetail,
    ImageResult,
    InferenceResultDetail,
    JobResultDetail,
    TrainingResultDetail,
    ValidationResultDetail,
)
from yolo_orch.domain.stream_results import StreamFrame, StreamResultDetail

__all__ = [
    "Artifact",
    "Chain",
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
    "StreamFrameEntry",
    "StreamFramePage",
    "StreamResultDetail",
    "TrainingResultDetail",
    "ValidationResultDetail",
    "Variant",
]


class Artifact(BaseModel):
    name: str
    size_bytes: int
    url: str


@dataclass(frozen=True)
class JobEvent:
    """One event of a job's stream: `state` when its state changed, else `progress`."""

    id: str | None
    event: str
    job: Job


class StreamFrameEntry(StreamFrame):
    """One frame of a stream job, numbered: `seq` grows by one a frame, across restarts."""

    # The server's own shape forbids fields it does not know; a newer server may add some.
    model_config = ConfigDict(extra="ignore")
    seq: int


class StreamFramePage(BaseModel):
    """A page of a stream job's frames (GET /v1/jobs/{id}/result?since=N)."""

    frames: list[StreamFrameEntry]
    next_since: int
    """The `since` of the next page: the last frame's `seq`, or the `since` asked when none came."""
    oldest: int | None
    """The `seq` of the oldest frame the server still keeps (None: none yet)."""

    def missed(self, since: int) -> int:
        """How many frames after `since` were deleted before this page read them (the server
        keeps a stream's latest segments only)."""
        return 0 if self.oldest is None else max(0, self.oldest - since - 1)


IMAGE_RESULT: TypeAdapter[Any] = TypeAdapter(ImageResult)
"""Validates one entry of an inference result (any task's image, a video, an unreadable one)."""
