"""GET /v1/jobs/{id}/playable/{name}: a video artifact (a video job's annotated mp4) as WebM,
for the dashboard's <video>.

The annotated videos are MPEG-4 Part 2 (`mp4v`, `runners.video.ANNOTATED_CODEC`: the only mp4
encoder the OpenCV wheel has), which browsers do not play. The wheel's FFmpeg does have VP8, which
every browser plays in WebM: the artifact is converted once, on its first request, to a hidden
file beside it (`.{name}.webm`: not listed as an artifact, deleted with the job), and served from
there with `Range` as any artifact."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Annotated

import anyio.to_thread
from fastapi import APIRouter
from fastapi import Path as PathParam

from yolo_orch.api.deps import ServicesDep
from yolo_orch.api.file_responses import RANGE_RESPONSES, RangedFileResponse
from yolo_orch.api.problems import problem_responses
from yolo_orch.errors import ArtifactNotFound

router = APIRouter()

PLAYABLE_SUFFIXES = (".mp4",)
"""The artifacts converted: the annotated videos (`*.annotated.mp4`)."""
PLAYABLE_CODEC = "VP80"
"""VP8 in WebM: in the OpenCV wheel's FFmpeg, and played by every browser."""


@router.get(
    "/{job_id}/playable/{name}",
    summary="A video artifact as WebM a browser plays",
    description="The artifact `name` (an `.mp4`: a video job's annotated video, MPEG-4 Part 2, "
    "which browsers do not play) converted to WebM (VP8) on its first request, then kept. "
    "404 `artifact_not_found` for no such artifact, one that is not an `.mp4`, or one that "
    "cannot be read as a video. `Range` requests are served (206, or 416 "
    "`range_not_satisfiable`).",
    response_class=RangedFileResponse,
    responses={**RANGE_RESPONSES, **problem_responses(404)},
)
async def get_playable(
    job_id: Annotated[str, PathParam(max_length=64)],
    name: Annotated[str, PathParam(max_length=255)],
    services: ServicesDep,
) -> RangedFileResponse:
    if not name.lower().endswith(PLAYABLE_SUFFIXES):
        raise ArtifactNotFound(job_id, name)
    source = await services.jobs.artifact(job_id, name)
    playable = await anyio.to_thread.run_sync(webm_of, source, limiter=services.file_limiter)
    if playable is None:
        raise ArtifactNotFound(job_id, name)
    return RangedFileResponse(playable, media_type="video/webm")


def webm_of(source: Path) -> Path | None:
    """`source` as WebM (VP8) beside it, converted now unless it was before (and `source` has
    not changed since); None when it cannot be read as a video. Blocking. Two first requests
    at once each convert to a file of their own; the last renamed into place stays."""
    target = source.with_name(f".{source.name}.webm")
    if target.is_file() and target.stat().st_mtime >= source.stat().st_mtime:
        return target
    partial = source.with_name(f".{source.name}.{uuid.uuid4().hex}.webm")
    try:
        if _convert(source, partial) == 0:
            return None
        os.replace(partial, target)
        return target
    finally:
        partial.unlink(missing_ok=True)


def _convert(source: Path, target: Path) -> int:
    """Every frame of `source` into `target` (VP8, at `source`'s rate): the frames written."""
    import cv2

    capture = cv2.VideoCapture(str(source))
    writer = None
    frames = 0
    try:
        fps = capture.get(cv2.CAP_PROP_FPS) or 25.0
        while True:
            ok, frame = capture.read()
            if not ok:
                return frames
            if writer is None:
                height, width = frame.shape[:2]
                fourcc = cv2.VideoWriter.fourcc(*PLAYABLE_CODEC)
                writer = cv2.VideoWriter(str(target), fourcc, fps, (width, height))
                if not writer.isOpened():
                    return 0
            writer.write(frame)
            frames += 1
    finally:
        capture.release()
        if writer is not None:
            writer.release()
