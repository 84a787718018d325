"""Settings of live streams: which cameras a stream may open, how many streams a lane takes, and
what a stream keeps of its results."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from yolo_orch.config.work import LaneKind
from yolo_orch.domain.streams import check_allowed_hosts

DEFAULT_STREAMS_PER_LANE: dict[LaneKind, int] = {"cpu": 4, "cuda": 32, "sim": 8}
DEFAULT_STREAM_FPS_PER_LANE: dict[LaneKind, float] = {"cpu": 60.0, "cuda": 960.0, "sim": 1000.0}


class LiveStreams(BaseModel):
    model_config = ConfigDict(title="Live streams")

    stream_allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Hosts stream jobs may open (rtsp, rtsps, http, https): names as written "
        '(never resolved), wildcards ("*.cams.lan"), addresses and networks ("10.20.0.0/16"). '
        "Empty: none, so a submission cannot make the server reach inside its network; local "
        "videos under the data roots are always allowed.",
    )
    streams_per_lane: dict[LaneKind, Annotated[int, Field(ge=0, le=1024)]] = Field(
        default_factory=lambda: dict(DEFAULT_STREAMS_PER_LANE),
        description="Stream jobs one lane runs at once, by lane kind, beside its batch jobs "
        "(streams take no turn of the lane); 0: no streams there. A kind left out keeps its "
        "default.",
    )
    stream_fps_per_lane: dict[LaneKind, Annotated[float, Field(gt=0, le=100_000)]] = Field(
        default_factory=lambda: dict(DEFAULT_STREAM_FPS_PER_LANE),
        description="The frames per second a lane's streams may ask for together (each "
        "stream: `max_fps` times its sources); a stream that does not fit waits queued.",
    )
    stream_segment_s: float = Field(
        default=60.0,
        ge=1,
        le=86_400,
        description="Seconds of a stream's results in one JSON Lines segment under its job.",
    )
    stream_segments_kept: int = Field(
        default=60,
        ge=1,
        le=100_000,
        description="Segments a running stream keeps; older ones are deleted as new ones start.",
    )

    @field_validator("stream_allowed_hosts", mode="after")
    @classmethod
    def _hosts_understood(cls, value: list[str]) -> list[str]:
        check_allowed_hosts(value)
        return value

    @field_validator("streams_per_lane", mode="after")
    @classmethod
    def _stream_defaults_kept(cls, value: dict[LaneKind, int]) -> dict[LaneKind, int]:
        return {**DEFAULT_STREAMS_PER_LANE, **value}

    @field_validator("stream_fps_per_lane", mode="after")
    @classmethod
    def _fps_defaults_kept(cls, value: dict[LaneKind, float]) -> dict[LaneKind, float]:
        return {**DEFAULT_STREAM_FPS_PER_LANE, **value}

    def stream_shares(self, lane_id: str) -> tuple[int, float]:
        """A lane's stream slots and frames per second, by its kind (`cuda:1` is a `cuda`
        lane); a lane of another node (`<node>/cuda:0`) takes no streams."""
        if "/" in lane_id:
            return 0, 0.0
        kind = lane_id.partition(":")[0]
        slots = self.streams_per_lane.get(kind, 0)  # type: ignore[call-overload]
        return slots, self.stream_fps_per_lane.get(kind, 0.0)  # type: ignore[call-overload]
