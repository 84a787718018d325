"""What the API shows of live streams beyond their job: the latest annotated snapshot, the shape
of a `frame` event, and the wait that interleaves a stream's frames with its job's changes on
GET /v1/jobs/{id}/events (the routes of results and events stay in `jobs.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Path, Response
from pydantic import Field

from yolo_orch.api.deps import JobServiceDep
from yolo_orch.api.problems import problem_responses
from yolo_orch.domain.stream_results import StreamFrame
from yolo_orch.jobs.notifications import JobEvents
from yolo_orch.ops.frame_feed import FrameFeed, JsonObject

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


class FrameEntry(StreamFrame):
    """A frame as the segments and `frame` events hold it: numbered."""

    seq: int = Field(description="The job's frame sequence: grows by one a frame, across restarts.")


FRAME_EVENT_SCHEMA: dict[str, Any] = FrameEntry.model_json_schema()
"""Inline in the events route's OpenAPI: no nested models, so no `$defs` to place."""


@router.get(
    "/{job_id}/snapshot.jpg",
    summary="A stream's latest annotated frame",
    description="A JPEG of a recent frame with its detections drawn, renewed every "
    "`params.snapshot_every_s` while the stream runs (the last one stays after it ends). 404 "
    "`snapshot_not_found` for a job that is not a stream, or a stream that wrote none yet.",
    response_class=Response,
    responses={200: {"content": {"image/jpeg": {}}}, **problem_responses(404)},
)
async def stream_snapshot(
    job_id: Annotated[str, Path(description="The job's id.", max_length=64)], jobs: JobServiceDep
) -> Response:
    # no-store: the same URL shows a newer frame each time it is renewed
    return Response(
        await jobs.snapshot(job_id),
        media_type="image/jpeg",
        headers={"Cache-Control": "no-store"},
    )


@dataclass
class Woken:
    """What ended a wait of `change_or_frame`: either, or both when they came together."""

    changed: bool = False
    frame: tuple[int, JsonObject | None] | None = None


async def change_or_frame(
    events: JobEvents, frames: FrameFeed, job_id: str, version: int, seen: int
) -> Woken:
    """Wait for the job's next change (after `version`) and its next frame (after the `seen`th)
    at once; the first to come cancels the other wait. A task group, so that neither wait
    outlives this call, whether it returns or the stream is closed."""
    woken = Woken()

    async with anyio.create_task_group() as waits:

        async def until_changed() -> None:
            await events.wait_for_change(job_id, version)
            woken.changed = True
            waits.cancel_scope.cancel()

        async def until_frame() -> None:
            woken.frame = await frames.next(job_id, seen)
            waits.cancel_scope.cancel()

        waits.start_soon(until_changed)
        waits.start_soon(until_frame)
    return woken
