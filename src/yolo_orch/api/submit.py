"""Submitting jobs: POST /v1/jobs (JSON) and POST /v1/jobs/inference (uploaded images), each
answered once the job is committed, or held with `Prefer: wait` until it ends."""

from __future__ import annotations

import errno
import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, BinaryIO

import anyio.to_thread
from fastapi import APIRouter, Body, Depends, Header, Request, Response, status
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException

from yolo_orch.api.deps import DiskSpace, Services, ServicesDep
from yolo_orch.api.prefer import PREFERENCE_APPLIED, RequestedWait, Wait, mark_applied
from yolo_orch.api.problems import problem_responses
from yolo_orch.api.schemas import JobCreate, JobPublic
from yolo_orch.domain import Job, NewJob
from yolo_orch.domain.specs import InferenceSpec
from yolo_orch.errors import (
    ErrorCode,
    InsufficientStorage,
    InvalidJob,
    QueueFull,
    UnsupportedMediaType,
)
from yolo_orch.files.images import refuse_oversized
from yolo_orch.files.jobfiles import JobFiles
from yolo_orch.kinds.inference import InferenceJobCreate
from yolo_orch.params.chains import ThenSteps
from yolo_orch.params.inference import InferenceParams

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

_FINISHED: dict[str, Any] = {
    "model": JobPublic,
    "description": "With `Prefer: wait`: the job ended in time (its result summary included).",
    "headers": {"Preference-Applied": PREFERENCE_APPLIED},
}
_ACCEPTED: dict[str, Any] = {
    "description": "Committed: the job is queued (or, with an `Idempotency-Key` seen before, the "
    "job that key made; with a `unique_key` held by a queued or running job, that job).",
    "headers": {
        "Location": {"description": "`/v1/jobs/{id}`", "schema": {"type": "string"}},
        "Idempotent-Replayed": {
            "description": "`true` when an earlier request with this key made the job",
            "schema": {"type": "string"},
        },
    },
}

IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=255,
        description="Retries with the same key and body return the same job.",
    ),
]


async def _json_body(request: Request) -> None:
    """A body sent as something other than JSON is refused as such (415), not read as JSON."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json" and not media_type.endswith("+json"):
        raise UnsupportedMediaType("send the job as application/json")


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobPublic,
    summary="Submit a job",
    description="Answers once the job is committed to the database (202). Poll `Location` for "
    "its state, or send `Prefer: wait=N`: the answer is then held up to N seconds and is 200 "
    "with the finished job (and `Preference-Applied`) if it ends in time.",
    responses={
        200: _FINISHED,
        202: _ACCEPTED,
        **problem_responses(404, 409, 415, 422, 429, 503, 507),
    },
    dependencies=[Depends(_json_body), DiskSpace],
)
async def submit_job(
    body: Annotated[JobCreate, Body()],
    services: ServicesDep,
    response: Response,
    wait: RequestedWait,
    idempotency_key: IdempotencyKey = None,
) -> JobPublic:
    new = body.to_new_job(services.settings.max_attempts, idempotency_key)
    job, created = await _submit(services, new, body.steps())
    return await _accepted(services, job, created, response, wait)


async def _submit(
    services: Services, new: NewJob, then: ThenSteps | None = None
) -> tuple[Job, bool]:
    try:
        return await services.jobs.submit(new, then)
    except QueueFull:
        services.metrics.rejected.inc()
        raise


async def _accepted(
    services: Services, job: Job, created: bool, response: Response, wait: Wait | None
) -> JobPublic:
    """202 with the queued job; with `Prefer: wait`, 200 with the job if it ends in time. The job
    was committed before any waiting: a client that goes away meanwhile leaves it to run."""
    response.headers["Location"] = f"/v1/jobs/{job.id}"
    if not created:
        response.headers["Idempotent-Replayed"] = "true"
    if wait is not None:
        job = await wait.until_finished(services.jobs, job.id)
        if job.state.is_terminal:
            response.status_code = status.HTTP_200_OK
            mark_applied(response, wait)
    return JobPublic.of(job)


_UPLOAD_FIELDS = 8
"""Form fields an upload may carry besides its images (it needs three)."""

_UPLOAD_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["model", "images"],
                    "properties": {
                        "model": {"type": "string", "minLength": 1, "maxLength": 200},
                        "images": {
                            "type": "array",
                            "minItems": 1,
                            "items": {"type": "string", "format": "binary"},
                            "description": "The images or videos (at most max_files_per_job).",
                        },
                        "params": {
                            "type": "string",
                            "default": "{}",
                            "description": "JSON object of inference params.",
                        },
                        "priority": {"type": "integer", "minimum": -100, "maximum": 100},
                    },
                }
            }
        },
    }
}


class _UploadFields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1, max_length=200)
    params: str = "{}"
    priority: int = Field(default=0, ge=-100, le=100)


@router.post(
    "/inference",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobPublic,
    summary="Submit an inference job with uploaded images",
    description="Multipart: the images (`images`, repeated) and the fields of a JSON inference "
    "job (`params` as a JSON object). The images are stored with the job before it is accepted. "
    "An image that cannot be decoded gets an `error` entry in the result; the others are "
    "processed. At most `max_files_per_job` images; more parts are refused before they are "
    "read. An image whose header says it has more than `max_image_pixels` pixels is refused "
    "(422 `image_too_large`) before anything decodes it. `Prefer: wait=N` as for POST /v1/jobs.",
    responses={
        200: _FINISHED,
        202: _ACCEPTED,
        **problem_responses(404, 409, 413, 422, 429, 503, 507),
    },
    dependencies=[DiskSpace],
    openapi_extra=_UPLOAD_BODY,
)
async def submit_inference_upload(
    request: Request,
    services: ServicesDep,
    response: Response,
    wait: RequestedWait,
    idempotency_key: IdempotencyKey = None,
) -> JobPublic:
    limit = services.settings.max_files_per_job
    try:
        form = await request.form(max_files=limit, max_fields=_UPLOAD_FIELDS)
    except StarletteHTTPException as exc:
        if exc.status_code != 400:
            raise  # e.g. 413: the body went over max_upload_bytes while it was read
        if "Too many files" in str(exc.detail):
            raise InvalidJob(
                f"{exc.detail} (max_files_per_job)", code=ErrorCode.TOO_MANY_FILES
            ) from None
        raise InvalidJob(
            f"unreadable multipart body: {exc.detail}", code=ErrorCode.INVALID_REQUEST
        ) from None
    try:
        images = [part for part in form.getlist("images") if isinstance(part, UploadFile)]
        fields = {key: value for key, value in form.multi_items() if key != "images"}
        try:
            if not images:
                raise ValidationError.from_exception_data(
                    "upload", [{"type": "missing", "loc": ("images",), "input": None}]
                )
            form_fields = _UploadFields.model_validate(fields)
            body = InferenceJobCreate(
                kind="inference",
                model=form_fields.model,
                inputs=[image.filename or f"image-{i}" for i, image in enumerate(images)],
                params=InferenceParams.model_validate_json(form_fields.params),
                priority=form_fields.priority,
            )
        except ValidationError as exc:
            raise RequestValidationError(exc.errors()) from None
        new = body.to_new_job(services.settings.max_attempts, idempotency_key)
        uploads = [(image.filename or "", image.file) for image in images]
        files, digests = await anyio.to_thread.run_sync(
            _saved_uploads,
            services.files,
            new.id,
            uploads,
            services.settings.max_image_pixels,
            limiter=services.file_limiter,
        )
    finally:
        await form.close()
    fingerprint = hashlib.sha256(f"{new.request_fingerprint}:{','.join(digests)}".encode())
    new = replace(
        new,
        spec=InferenceSpec.model_validate({**new.spec.stored(), "files": files}),
        request_fingerprint=fingerprint.hexdigest(),
    )
    try:
        job, created = await _submit(services, new)
    except BaseException:
        await anyio.to_thread.run_sync(services.files.remove, new.id, limiter=services.file_limiter)
        raise
    if created:
        services.runtime.uploaded([Path(file["path"]) for file in files])
    else:  # an earlier request with this key made the job, with its own copies
        await anyio.to_thread.run_sync(services.files.remove, new.id, limiter=services.file_limiter)
    return await _accepted(services, job, created, response, wait)


def _saved_uploads(
    job_files: JobFiles, job_id: str, uploads: list[tuple[str, BinaryIO]], max_pixels: int
) -> tuple[list[dict[str, str]], list[str]]:
    """The uploads saved in the job's folder and their headers checked, in one thread hop; the
    folder is removed again if the save fails or an image is refused. Blocking."""
    try:
        files, digests = job_files.save_inputs(job_id, uploads)
        refuse_oversized(files, max_pixels)
    except BaseException as exc:
        job_files.remove(job_id)
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:  # since the guard last looked
            raise InsufficientStorage([f"jobs: {exc.strerror}"], full=True) from exc
        raise
    return files, digests
