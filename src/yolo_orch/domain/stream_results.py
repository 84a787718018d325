"""The shapes of a stream job's results: a frame's entry (in the job's JSON Lines segments and
its `frame` events), each source's counters, and the result a finished stream keeps."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StreamFrame(_Shape):
    """One processed frame, as a segment line and a `frame` event hold it."""

    source: int = Field(description="The source's index in the job's `sources`.")
    frame: int = Field(description="The frame's number in its source, counting every frame read.")
    captured_at: float = Field(description="When it was read (Unix time, seconds).")
    latency_ms: float = Field(description="From its capture to its result.")
    width: int
    height: int
    detections: list[dict[str, Any]] = Field(
        description="As an inference job's, the model task's shape; with `track`, each has its "
        "`track_id`."
    )
    events: list[dict[str, Any]] = Field(
        default_factory=list,
        description='Zone entries and exits, line crossings: {"zone" or "line", "direction", '
        '"class", "track_id"}.',
    )
    model_id: str | None = Field(
        default=None,
        description="The registry model that made it (a stream naming an alias switches to "
        "the model the alias is moved to, between two frames); null for a runtime's own model.",
    )


class SourceCounters(_Shape):
    source: str = Field(description="As shown: credentials redacted.")
    health: str = Field(description="connecting, live, reconnecting or source_lost.")
    frames_read: int
    frames_processed: int
    frames_dropped: int = Field(
        description="Frames taken (within `max_fps`) that a newer frame replaced before its "
        "lane reached them."
    )
    reconnects: int
    fps_in: float = Field(description="Frames taken per second, lately.")
    fps_out: float = Field(description="Frames processed per second, lately.")


class StreamResultDetail(_Shape):
    frames: int = Field(description="Frames processed, every source together.")
    sources: list[SourceCounters]
    counts: dict[str, Any] = Field(
        description='Zone and line counts: {"zones": {name: {"inside", "in", "out"}}, '
        '"lines": {name: {"in", "out"}}}, each per class.'
    )
    segments: list[str] = Field(
        description="The JSON Lines segments kept (GET /v1/jobs/{id}/result?since=...)."
    )
