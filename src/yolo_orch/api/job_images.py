"""GET /v1/jobs/{id}/inputs/{index}: an image uploaded with an inference job, for the dashboard
to draw the job's detections over. Only files in the job's own `inputs/` folder are served:
inputs named under a data root stay on the server."""

from __future__ import annotations

from typing import Annotated

import anyio.to_thread
from fastapi import APIRouter, Path

from yolo_orch.api import job_videos
from yolo_orch.api.deps import ServicesDep
from yolo_orch.api.file_responses import RANGE_RESPONSES, RangedFileResponse
from yolo_orch.api.problems import problem_responses
from yolo_orch.domain.specs import InferenceSpec
from yolo_orch.errors import UploadNotFound

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

IMAGE_TYPES = {
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".png": "image/png",
    ".webp": "image/webp",
    ".bmp": "image/bmp",
    ".gif": "image/gif",
    ".tif": "image/tiff",
    ".tiff": "image/tiff",
}
"""Anything else is sent as bytes to save: an upload named `x.html` must never run as a page of
this origin, where the dashboard keeps its token."""
_LOCKED_DOWN = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox"}


@router.get(
    "/{job_id}/inputs/{index}",
    summary="An uploaded input image",
    description="The `index`-th image uploaded with the job (POST /v1/jobs/inference), in the "
    "order of the result's `images`. 404 `upload_not_found` for inputs named under a data root. "
    "`Range` requests are served (206, or 416 `range_not_satisfiable`).",
    response_class=RangedFileResponse,
    responses={**RANGE_RESPONSES, **problem_responses(404)},
)
async def get_input(
    job_id: Annotated[str, Path(max_length=64)],
    index: Annotated[int, Path(ge=0, le=2**31)],
    services: ServicesDep,
) -> RangedFileResponse:
    job = await services.jobs.get(job_id)
    files = (job.spec.files if isinstance(job.spec, InferenceSpec) else None) or []
    path = None
    if index < len(files):
        path = await anyio.to_thread.run_sync(
            services.files.uploaded_input, job_id, files[index].path, limiter=services.file_limiter
        )
    if path is None:
        raise UploadNotFound(job_id, index)
    media_type = IMAGE_TYPES.get(path.suffix.lower())
    if media_type is None:
        return RangedFileResponse(
            path, media_type="application/octet-stream", filename=path.name, headers=_LOCKED_DOWN
        )
    return RangedFileResponse(path, media_type=media_type, headers=_LOCKED_DOWN)


# A video job's annotated video as a browser plays it: GET /v1/jobs/{id}/playable/{name}.
router.include_router(job_videos.router)
