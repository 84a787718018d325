"""/v1/jobs: submit, poll, list, cancel, fetch results."""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Annotated, Any

import anyio.to_thread
from fastapi import APIRouter, Body, Depends, Header, Path, Query, Request, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, PlainTextResponse, StreamingResponse
from fastapi.sse import EventSourceResponse, ServerSentEvent
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException

from yolo_orch.api.auth import admin_scope
from yolo_orch.api.deps import DiskSpace, JobServiceDep, Services, ServicesDep
from yolo_orch.api.problems import problem_responses
from yolo_orch.api.results import JobResultDetail
from yolo_orch.api.schemas import (
    InferenceJobCreate,
    JobCreate,
    JobList,
    JobPublic,
)
from yolo_orch.domain import Job, JobFilter, JobKind, JobState, NewJob
from yolo_orch.errors import InvalidCursor, InvalidJob, QueueFull
from yolo_orch.images import refuse_oversized
from yolo_orch.params.inference import InferenceParams

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

JobId = Annotated[str, Path(description="The job's id.", max_length=64)]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=255,
        description="Retries with the same key and body return the same job.",
    ),
]


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=JobPublic,
    summary="Submit a job",
    description="Answers once the job is committed to the database. Poll `Location` for its state.",
    responses=problem_responses(404, 422, 429, 503, 507),
    dependencies=[DiskSpace],
)
async def submit_job(
    body: Annotated[JobCreate, Body()],
    services: ServicesDep,
    response: Response,
    idempotency_key: IdempotencyKey = None,
) -> JobPublic:
    new = body.to_new_job(services.settings.max_attempts, idempotency_key)
    job, created = await _submit(services, new)
    return _accepted(job, created, response)


async def _submit(services: Services, new: NewJob) -> tuple[Job, bool]:
    try:
        return await services.jobs.submit(new)
    except QueueFull:
        services.metrics.rejected.inc()
        raise


def _accepted(job: Job, created: bool, response: Response) -> JobPublic:
    response.headers["Location"] = f"/v1/jobs/{job.id}"
    if not created:
        response.headers["Idempotent-Replayed"] = "true"
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
                            "description": "The images to run (at most max_files_per_job).",
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
    "(422 `image_too_large`) before anything decodes it.",
    responses=problem_responses(404, 413, 422, 429, 503, 507),
    openapi_extra=_UPLOAD_BODY,
    dependencies=[DiskSpace],
)
async def submit_inference_upload(
    request: Request,
    services: ServicesDep,
    response: Response,
    idempotency_key: IdempotencyKey = None,
) -> JobPublic:
    limit = services.settings.max_files_per_job
    try:
        form = await request.form(max_files=limit, max_fields=_UPLOAD_FIELDS)
    except StarletteHTTPException as exc:
        if exc.status_code != 400:
            raise  # e.g. 413: the body went over max_upload_bytes while it was read
        if "Too many files" in str(exc.detail):
            raise InvalidJob(f"{exc.detail} (max_files_per_job)", code="too_many_files") from None
        raise InvalidJob(
            f"unreadable multipart body: {exc.detail}", code="invalid_request"
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
            services.files.save_inputs, new.id, uploads, limiter=services.file_limiter
        )
        try:
            await anyio.to_thread.run_sync(
                refuse_oversized,
                files,
                services.settings.max_image_pixels,
                limiter=services.file_limiter,
            )
        except BaseException:
            await anyio.to_thread.run_sync(services.files.remove, new.id)
            raise
    finally:
        await form.close()
    fingerprint = hashlib.sha256(f"{new.request_fingerprint}:{','.join(digests)}".encode())
    new = replace(
        new,
        spec={**new.spec, "files": files},
        request_fingerprint=fingerprint.hexdigest(),
    )
    try:
        job, created = await _submit(services, new)
    except BaseException:
        await anyio.to_thread.run_sync(services.files.remove, new.id, limiter=services.file_limiter)
        raise
    if not created:  # an earlier request with this key made the job, with its own copies
        await anyio.to_thread.run_sync(services.files.remove, new.id, limiter=services.file_limiter)
    return _accepted(job, created, response)


@router.get("", response_model=JobList, summary="List jobs, newest first")
async def list_jobs(
    jobs: JobServiceDep,
    state: Annotated[list[JobState] | None, Query(description="Repeat to allow several.")] = None,
    kind: Annotated[list[JobKind] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[
        str | None,
        Query(
            max_length=64,
            pattern=r"^[A-Za-z0-9_-]+$",
            description="Opaque: the `next_cursor` of the page before. Any value this server did "
            "not issue is refused (422 `invalid_cursor`).",
        ),
    ] = None,
) -> JobList:
    page = await jobs.list_jobs(
        JobFilter(states=tuple(state or ()), kinds=tuple(kind or ())),
        limit=limit,
        before_seq=_decode_cursor(cursor),
    )
    return JobList(
        jobs=[JobPublic.of(job) for job in page.jobs],
        next_cursor=_encode_cursor(page.next_cursor),
    )


@router.get(
    "/{job_id}", response_model=JobPublic, summary="Get a job", responses=problem_responses(404)
)
async def get_job(job_id: JobId, jobs: JobServiceDep) -> JobPublic:
    return JobPublic.of(await jobs.get(job_id))


@router.post(
    "/{job_id}/cancel",
    response_model=JobPublic,
    summary="Cancel a job",
    description="A queued job is cancelled at once (200). A running job is asked to stop at its "
    "next safe point (202, `cancel_requested`), then ends `cancelled`.",
    responses={202: {"model": JobPublic}, **problem_responses(404, 409)},
)
async def cancel_job(job_id: JobId, jobs: JobServiceDep, response: Response) -> JobPublic:
    job = await jobs.cancel(job_id)
    if not job.state.is_terminal:
        response.status_code = status.HTTP_202_ACCEPTED
    return JobPublic.of(job)


@router.delete(
    "/{job_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete a finished job",
    description="Forgets a finished job's record and removes its files (inputs, results, "
    "artifacts, logs). Refused (409 `job_active`) while it is queued or running: cancel it "
    "first. A model it produced stays in the registry. Needs the `admin` scope.",
    responses=problem_responses(404, 409),
    dependencies=[admin_scope],
)
async def delete_job(job_id: JobId, services: ServicesDep) -> Response:
    await services.retention.delete(job_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


RESULT_PAGE_DEFAULT = 100
RESULT_PAGE_MAX = 1000


@router.get(
    "/{job_id}/result",
    summary="The full result of a succeeded job, or a page of its per-image entries",
    description="Inference: per image (`images`), what the model's task finds (detections; "
    "with masks, keypoints or rotated boxes; classes; or a class or depth map, saved as an "
    "artifact). Training: metrics and the produced "
    "model. Without `offset` and `limit`, the whole result, streamed from disk. With either, a "
    'page of the per-image entries: `{"offset", "limit", "total", "next_offset", '
    '"images"}`, where `images` holds entries `offset` to `offset + limit - 1` (fewer at the '
    "end) and `next_offset` is the `offset` of the next page, or null after the last. A "
    "result without per-image entries (training) has `total` 0.",
    responses={200: {"model": JobResultDetail}, **problem_responses(404, 409)},
)
async def get_result(
    job_id: JobId,
    jobs: JobServiceDep,
    offset: Annotated[int | None, Query(ge=0, le=2**31, description="First entry.")] = None,
    limit: Annotated[
        int | None, Query(ge=1, le=RESULT_PAGE_MAX, description="Entries per page.")
    ] = None,
) -> Response:
    if offset is None and limit is None:
        return FileResponse(await jobs.result_file(job_id), media_type="application/json")
    limit = limit or RESULT_PAGE_DEFAULT
    page = await jobs.result_page(job_id, offset or 0, limit)
    return StreamingResponse(page.json(limit), media_type="application/json")


async def _followed_job(job_id: JobId, services: ServicesDep) -> tuple[int, Job]:
    """The job with the event id read just before it. A dependency, so that an unknown job is a
    404 before the stream starts."""
    # The version first: a change between the two reads is then seen as a change, not missed.
    version = services.events.version(job_id)
    return version, await services.jobs.get(job_id)


@router.get(
    "/{job_id}/events",
    summary="Follow a job: server-sent events",
    description="`text/event-stream`. Each event carries the job as GET /v1/jobs/{id} returns it: "
    "`event: state` when its state changed, `event: progress` otherwise; `id` grows with every "
    "change. The first event is the job as it is now (skipped when `Last-Event-ID` says the "
    "client has it). The stream ends after the event with a terminal state. A comment is sent "
    "every 15 s of quiet to keep proxies from closing the stream.",
    response_class=EventSourceResponse,
    responses={
        200: {
            "content": {
                "text/event-stream": {
                    "itemSchema": {
                        "properties": {
                            "data": {
                                "contentMediaType": "application/json",
                                "contentSchema": {"$ref": "#/components/schemas/JobPublic"},
                            },
                            "event": {"enum": ["state", "progress"]},
                        },
                        "required": ["data", "event", "id"],
                    }
                }
            }
        },
        **problem_responses(404),
    },
)
async def job_events(
    followed: Annotated[tuple[int, Job], Depends(_followed_job)],
    services: ServicesDep,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=32)] = None,
) -> AsyncIterator[ServerSentEvent]:
    # FastAPI sends the keep-alive comments while this waits.
    version, job = followed
    events = services.events
    sent_state = None
    if last_event_id is None or last_event_id != str(version) or job.state.is_terminal:
        yield _event(version, "state", job)
        sent_state = job.state
    while not job.state.is_terminal:
        await events.wait_for_change(job.id, version)
        version = events.version(job.id)
        job = await services.jobs.get(job.id)
        yield _event(version, "state" if job.state != sent_state else "progress", job)
        sent_state = job.state


def _event(event_id: int, event: str, job: Job) -> ServerSentEvent:
    return ServerSentEvent(id=str(event_id), event=event, data=JobPublic.of(job))


@router.get(
    "/{job_id}/metrics",
    summary="A training job's metrics per epoch",
    description="One entry per completed epoch: `epoch`, `train_loss`, `val_loss`, "
    "`precision`, `recall`, `mAP50`, `mAP50-95`; updated after each epoch while the job runs. "
    "An empty list for other jobs.",
    responses={200: {"content": {"application/json": {}}}, **problem_responses(404)},
)
async def job_metrics(job_id: JobId, jobs: JobServiceDep) -> Response:
    return Response(await jobs.training_metrics(job_id), media_type="application/json")


@router.get(
    "/{job_id}/logs",
    summary="The job's log lines",
    description="Its transitions and whatever its runner logged, as plain text.",
    response_class=PlainTextResponse,
    responses=problem_responses(404),
)
async def job_logs(job_id: JobId, jobs: JobServiceDep) -> PlainTextResponse:
    return PlainTextResponse(await jobs.log_text(job_id))


class ArtifactPublic(BaseModel):
    name: str
    size_bytes: int
    url: str


class ArtifactList(BaseModel):
    artifacts: list[ArtifactPublic]


@router.get(
    "/{job_id}/artifacts",
    response_model=ArtifactList,
    summary="Files a job produced",
    description="Annotated images, weights, `results.csv`, ...",
    responses=problem_responses(404),
)
async def list_artifacts(job_id: JobId, jobs: JobServiceDep) -> ArtifactList:
    return ArtifactList(
        artifacts=[
            ArtifactPublic(name=name, size_bytes=size, url=f"/v1/jobs/{job_id}/artifacts/{name}")
            for name, size in await jobs.artifacts(job_id)
        ]
    )


@router.get(
    "/{job_id}/artifacts/{name}",
    summary="Download one artifact",
    response_class=FileResponse,
    responses=problem_responses(404),
)
async def get_artifact(
    job_id: JobId, name: Annotated[str, Path(max_length=255)], jobs: JobServiceDep
) -> FileResponse:
    return FileResponse(await jobs.artifact(job_id, name), filename=name)


_MAX_SEQ = 2**63 - 1
"""Cursors hold a row's sequence number: an SQLite integer."""


def _encode_cursor(seq: int | None) -> str | None:
    if seq is None:
        return None
    return base64.urlsafe_b64encode(f"seq:{seq}".encode()).decode().rstrip("=")


def _decode_cursor(cursor: str | None) -> int | None:
    if cursor is None:
        return None
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        prefix, _, value = text.partition(":")
        if prefix != "seq" or not value.isdigit() or len(value) > 19 or int(value) > _MAX_SEQ:
            raise ValueError(text)
        return int(value)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise InvalidCursor(f"cursor {cursor!r} was not issued by this server") from None
