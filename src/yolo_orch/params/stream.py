"""Stream job parameters: the forward pass's (shared with inference), how many frames are taken,
tracking, the zones and lines counted, when the stream ends and what it publishes."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Annotated

from pydantic import Field, model_validator

from yolo_orch.domain import Job
from yolo_orch.params.capture import CaptureParams
from yolo_orch.params.common import StrictParams
from yolo_orch.params.inference import (
    BOX_TASKS,
    MAX_VIDEO_SECONDS,
    ForwardPassParams,
    TrackerSettings,
    TrackerType,
    check_tracker,
    forward_pass_key,
)

STREAM_TASKS = ("detect", "segment", "pose", "obb", "classify")
"""The model tasks streams run: those whose results are values, not a map saved per frame."""
MAX_SOURCES = 16
"""Sources one stream job may read."""

Coordinate = Annotated[float, Field(ge=0, le=1)]
Point = Annotated[list[Coordinate], Field(min_length=2, max_length=2)]
"""[x, y]: a list, not a tuple, so that params read back from the store's JSON validate
strictly (`StrictParams.from_job`)."""


class ZoneParams(StrictParams):
    name: str = Field(min_length=1, max_length=64, description="Named in counts and metrics.")
    points: list[Point] = Field(
        min_length=3,
        max_length=64,
        description="The polygon's corners as [x, y], each 0..1 of the frame's width and height "
        "(x right, y down).",
    )


class LineParams(StrictParams):
    name: str = Field(min_length=1, max_length=64, description="Named in counts and metrics.")
    start: Point = Field(description="[x, y], 0..1 of the frame's width and height.")
    end: Point = Field(
        description="[x, y]; a line drawn from top to bottom counts objects "
        "moving left to right as `in`, one drawn left to right those moving up."
    )


class StreamParams(ForwardPassParams):
    max_fps: float = Field(
        default=5.0,
        gt=0,
        le=120,
        description="Frames taken per second from each source, at most; the newest frame is "
        "always the one taken, and frames a lane could not keep up with are counted as dropped.",
    )
    track: TrackerType | None = Field(
        default=None,
        description="Follow objects across each source's frames with ultralytics' \"bytetrack\" "
        'or "botsort" (one tracker per source); detections then carry `track_id`. Zone in/out '
        "counts and line crossings need it.",
        json_schema_extra={"x-tasks": [*BOX_TASKS]},
    )
    tracker: TrackerSettings | None = Field(
        default=None,
        description="With `track`: the tracker's own settings, checked against its yaml.",
    )
    zones: list[ZoneParams] = Field(
        default_factory=list,
        max_length=32,
        description="Polygons whose objects are counted per class: `inside` now, and (with "
        "`track`) `in` and `out` as tracks enter and leave.",
    )
    lines: list[LineParams] = Field(
        default_factory=list,
        max_length=32,
        description="Lines whose crossings (with `track`) are counted per class and direction.",
    )
    end_s: float | None = Field(
        default=None,
        gt=0,
        le=MAX_VIDEO_SECONDS,
        description="The stream succeeds after running this long (unset: until cancelled).",
    )
    max_frames: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000_000,
        description="The stream succeeds once this many frames were processed (all sources).",
    )
    snapshot_every_s: float = Field(
        default=5.0,
        ge=0,
        le=3600,
        description="How often the annotated snapshot (GET /v1/jobs/{id}/snapshot.jpg) is "
        "renewed; 0: never.",
    )
    events_max_hz: float = Field(
        default=2.0,
        gt=0,
        le=30,
        description="`frame` events per second, at most, on the job's event stream (per job).",
    )
    reconnect_give_up_s: float = Field(
        default=300.0,
        gt=0,
        le=7 * 24 * 3600,
        description="A source that cannot be read again for this long fails the job "
        "`source_lost`; until then it is reconnected with exponential backoff and jitter.",
    )
    capture: CaptureParams | None = Field(
        default=None,
        description="Store the frames `when` selects, with the model's predictions as their "
        "labels, in a managed dataset (docs/capture.md).",
    )

    @model_validator(mode="after")
    def _check_stream_params(self) -> StreamParams:
        check_tracker(self.track, self.tracker)
        for what, named in (("zones", self.zones), ("lines", self.lines)):
            names = [item.name for item in named]
            if len(set(names)) != len(names):
                raise ValueError(f"params.{what}: names must differ")
        if any(line.start == line.end for line in self.lines):
            raise ValueError("params.lines: a line's start and end must differ")
        return self

    def forward_pass(self) -> ForwardPassParams:
        """The params its forward passes run with (what `predict` is given)."""
        return ForwardPassParams.model_validate(
            self.model_dump(include=set(ForwardPassParams.model_fields))
        )


def shared_pass_key(job: Job) -> Hashable:
    """What streams must have in common for their frames to share a lane's forward passes:
    the model and the forward-pass params, as inference jobs (`forward_pass_key`)."""
    return (job.model_id or job.model, forward_pass_key(job.params))
