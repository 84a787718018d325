"""/v1/jobs: poll, list, cancel, fetch results and events (submission: `submit.py`)."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import re
from collections.abc import AsyncIterator
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Header, Path, Query, Response, status
from fastapi.responses import PlainTextResponse, StreamingResponse
from fastapi.sse import EventSourceResponse, ServerSentEvent
from pydantic import BaseModel

from yolo_orch.api.auth import admin_scope
from yolo_orch.api.deps import JobServiceDep, ServicesDep
from yolo_orch.api.file_responses import RANGE_RESPONSES, RangedFileResponse
from yolo_orch.api.model_files import job_variant_files
from yolo_orch.api.prefer import PREFERENCE_APPLIED, RequestedWait, mark_applied
from yolo_orch.api.problems import problem_responses
from yolo_orch.api.schemas import (
    JobList,
    JobPublic,
)
from yolo_orch.api.streams import FRAME_EVENT_SCHEMA, change_or_frame
from yolo_orch.domain import Job, JobFilter, JobKind, JobState
from yolo_orch.domain.results import JobResultDetail
from yolo_orch.errors import ErrorCode, InvalidCursor, InvalidJob

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

JobId = Annotated[str, Path(description="The job's id.", max_length=64)]


@router.get("", response_model=JobList, summary="List jobs, newest first")
async def list_jobs(
    jobs: JobServiceDep,
    state: Annotated[list[JobState] | None, Query(description="Repeat to allow several.")] = None,
    kind: Annotated[list[JobKind] | None, Query()] = None,
    chain: Annotated[
        str | None,
        Query(max_length=64, description="Only the jobs of this chain (its training's id)."),
    ] = None,
    id_prefix: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=64,
            pattern=r"^[A-Za-z0-9_-]+$",
            description="Only the jobs whose id starts with this (the short id shown).",
        ),
    ] = None,
    model: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=512,
            description="Only the jobs that name this model, exactly as they named it "
            "(`yolo11n.pt`, `detector@production`).",
        ),
    ] = None,
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
        JobFilter(
            states=tuple(state or ()),
            kinds=tuple(kind or ()),
            chain_id=chain,
            id_prefix=id_prefix,
            model=model,
        ),
        limit=limit,
        before_seq=_decode_cursor(cursor),
    )
    return JobList(
        jobs=[JobPublic.of(job) for job in page.jobs],
        next_cursor=_encode_cursor(page.next_cursor),
    )


@router.get(
    "/{job_id}",
    response_model=JobPublic,
    summary="Get a job",
    description="With `Prefer: wait=N`, a long poll: the answer is held until the job ends or N "
    "seconds pass, and says so with `Preference-Applied`.",
    responses={
        200: {"headers": {"Preference-Applied": PREFERENCE_APPLIED}},
        **problem_responses(404),
    },
)
async def get_job(
    job_id: JobId, jobs: JobServiceDep, response: Response, wait: RequestedWait
) -> JobPublic:
    if wait is None:
        return JobPublic.of(await jobs.get(job_id))
    job = await wait.until_finished(jobs, job_id)  # unknown job: 404 at once
    mark_applied(response, wait)
    return JobPublic.of(job)


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
    responses=problem_responses(403, 404, 409),
    dependencies=[admin_scope],
)
async def delete_job(job_id: JobId, services: ServicesDep) -> Response:
    await services.retention.delete(job_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


RESULT_PAGE_DEFAULT = 100
_MAX_SEQ = 2**63 - 1
"""Cursors hold a row's sequence number, an SQLite integer; a stream's `since` is bounded alike."""
RESULT_PAGE_MAX = 1000


@router.get(
    "/{job_id}/result",
    summary="The full result of a succeeded job, or a page of its per-image entries",
    description="Inference: per image (`images`), what the model's task finds (detections; "
    "with masks, keypoints or rotated boxes; classes; or a class or depth map, saved as an "
    "artifact). Training: metrics and the produced "
    "model. Validation: the metrics, per class, and the confusion matrix. Export: the variant "
    "made. Without `offset` and `limit`, the whole result (a large one streamed from its "
    "file). With either, a "
    'page of the per-image entries: `{"offset", "limit", "total", "next_offset", '
    '"images"}`, where `images` holds entries `offset` to `offset + limit - 1` (fewer at the '
    "end) and `next_offset` is the `offset` of the next page, or null after the last. A "
    "result without per-image entries (training) has `total` 0. With `entry`, the index of a "
    "video's entry in `images`, the page holds that video's frames instead (`frames`, from "
    "its JSON Lines artifact; 404 `frames_not_found` for an entry that is not a video). A "
    "whole result served from its file honours `Range` (206, or 416 `range_not_satisfiable`). "
    "409 `result_not_ready` while the job is queued or running (ask again later); 409 "
    "`no_result` once it failed (see its `error`) or was cancelled: it will never have one. "
    "Stream: its counters and counts once it ended. With `since`, a stream's frames as they "
    "come, running or ended: those with `seq` > `since`, oldest first, from its JSON Lines "
    'segments: `{"frames", "next_since", "oldest"}`, where `next_since` is the `since` of the '
    "next page (the last frame's `seq`, or `since` when none came yet) and `oldest` the `seq` "
    "of the oldest frame still kept (older segments are deleted as new ones start: a `since` "
    "below `oldest - 1` missed some); `limit` frames at most. `since` on a job of another kind: "
    "422 `not_a_stream`; `since` with `offset` or `entry` is refused (422 `invalid_request`).",
    responses={
        200: {"model": JobResultDetail},
        **RANGE_RESPONSES,
        **problem_responses(404, 409, 422),
    },
)
async def get_result(
    job_id: JobId,
    jobs: JobServiceDep,
    offset: Annotated[int | None, Query(ge=0, le=2**31, description="First entry.")] = None,
    limit: Annotated[
        int | None, Query(ge=1, le=RESULT_PAGE_MAX, description="Entries per page.")
    ] = None,
    entry: Annotated[
        int | None, Query(ge=0, le=2**31, description="A video's entry: page its frames.")
    ] = None,
    since: Annotated[
        int | None,
        Query(
            ge=0,
            le=_MAX_SEQ,
            description="A stream's frames after this `seq` (0: from the oldest kept).",
        ),
    ] = None,
) -> Response:
    if since is not None:
        if offset is not None or entry is not None:
            raise InvalidJob(
                "`since` pages a stream's frames; `offset` and `entry` page other results: "
                "give one or the other",
                code=ErrorCode.INVALID_REQUEST,
            )
        stream = await jobs.stream_frames(job_id, since, limit or RESULT_PAGE_DEFAULT)
        return Response(json.dumps(dataclasses.asdict(stream)), media_type="application/json")
    if entry is not None:
        limit = limit or RESULT_PAGE_DEFAULT
        frames = await jobs.frame_page(job_id, entry, offset or 0, limit)
        return StreamingResponse(frames.json(limit), media_type="application/json")
    if offset is None and limit is None:
        result = await jobs.result(job_id)
        if isinstance(result, bytes):
            return Response(result, media_type="application/json")
        return RangedFileResponse(result, media_type="application/json")
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
    description="`text/event-stream`. Each `state` or `progress` event carries the job as GET "
    "/v1/jobs/{id} returns it: `event: state` when its state changed, `event: progress` "
    "otherwise; `id` grows with every change. The first event is the job as it is now (skipped "
    "when `Last-Event-ID` says the client has it). A running stream job's events also include "
    "`event: frame`, whose data is a recent frame's entry as its segments hold it (`seq`, "
    "`source`, `frame`, `captured_at`, `latency_ms`, `width`, `height`, `detections`, "
    "`events`), at most `params.events_max_hz` a second; a slow client gets the newest frame, "
    "not a backlog (GET /v1/jobs/{id}/result?since=... has every frame). Frame events carry "
    "no `id`: `Last-Event-ID` stays the job's. The stream ends after the event with a terminal "
    "state. A comment is sent every 15 s of quiet to keep proxies from closing the stream.",
    response_class=EventSourceResponse,
    responses={
        200: {
            "content": {
                "text/event-stream": {
                    "itemSchema": {
                        "properties": {
                            "data": {
                                "contentMediaType": "application/json",
                                "contentSchema": {
                                    "oneOf": [
                                        {"$ref": "#/components/schemas/JobPublic"},
                                        FRAME_EVENT_SCHEMA,
                                    ]
                                },
                            },
                            "event": {"enum": ["state", "progress", "frame"]},
                            "id": {"description": "Absent on `frame` events."},
                        },
                        "required": ["data", "event"],
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
    frames_seen = 0
    while not job.state.is_terminal:
        if job.kind is JobKind.STREAM:
            woken = await change_or_frame(events, services.frames, job.id, version, frames_seen)
            if woken.frame is not None:
                frames_seen, frame = woken.frame
                if frame is not None:
                    yield ServerSentEvent(event="frame", data=frame)
                else:  # the run ended: a later run of the job numbers its frames from 1 again
                    frames_seen = 0
            if not woken.changed:
                continue
        else:
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
    description="One entry per completed epoch: `epoch`, `train_loss` and `val_loss` (each the "
    "loss terms), and the scores of the model's task (`precision`, `recall`, `mAP50`, "
    "`mAP50-95` for boxes, with `mask_` or `pose_` ones; `top1`, `top5`; `mIoU`, `pixel_acc`; "
    "`delta1`, `abs_rel`, ...); updated after each epoch while the job runs. "
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
    description="Annotated images, weights, `results.csv`, ...; the variants an export (or a "
    "training with `params.export`) made, each with the URL of its download route "
    "(`/v1/models/{ref}/variants/{id}/file`; an OpenVINO variant's `size_bytes` is its files', "
    "its zip a little larger).",
    responses=problem_responses(404),
)
async def list_artifacts(job_id: JobId, services: ServicesDep) -> ArtifactList:
    files = await services.jobs.artifacts(job_id)
    variants = await job_variant_files(services, await services.jobs.get(job_id))
    return ArtifactList(
        artifacts=[
            ArtifactPublic(name=name, size_bytes=size, url=artifact_url(job_id, name))
            for name, size in files
        ]
        + [ArtifactPublic(name=name, size_bytes=size, url=url) for name, size, url in variants]
    )


def artifact_url(job_id: str, name: str) -> str:
    """Where an artifact is fetched: each path segment percent-encoded (a file name may hold
    spaces, newlines, `#`, `?`, `%` or non-ASCII characters)."""
    return f"/v1/jobs/{quote(job_id, safe='')}/artifacts/{quote(name, safe='')}"


@router.get(
    "/{job_id}/artifacts/{name}",
    summary="Download one artifact",
    description="`Range` requests are served (206, or 416 `range_not_satisfiable`).",
    response_class=RangedFileResponse,
    responses={**RANGE_RESPONSES, **problem_responses(404)},
)
async def get_artifact(
    job_id: JobId, name: Annotated[str, Path(max_length=255)], jobs: JobServiceDep
) -> RangedFileResponse:
    return RangedFileResponse(await jobs.artifact(job_id, name), filename=name)


_CURSOR_TEXT = re.compile(r"seq:([0-9]{1,19})")
"""ASCII digits only: `str.isdigit` and `int` also take other scripts' digits (Arabic-Indic,
fullwidth, ...)."""


def _encode_cursor(seq: int | None) -> str | None:
    if seq is None:
        return None
    return base64.urlsafe_b64encode(f"seq:{seq}".encode()).decode().rstrip("=")


def _decode_cursor(cursor: str | None) -> int | None:
    if cursor is None:
        return None
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (ValueError, binascii.Error, UnicodeDecodeError):
        text = ""
    found = _CURSOR_TEXT.fullmatch(text)
    seq = int(found[1]) if found is not None else None
    # Only what `_encode_cursor` writes: no leading zeros, no other base64 spelling of it.
    if seq is None or seq > _MAX_SEQ or _encode_cursor(seq) != cursor:
        raise InvalidCursor(f"cursor {cursor!r} was not issued by this server")
    return seq
