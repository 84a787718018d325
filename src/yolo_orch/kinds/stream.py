"""Stream: a model run on live sources (RTSP cameras, HTTP(S) MJPEG or HLS, or a local video
looped) until the job is cancelled or reaches its `end_s` or `max_frames`.

A stream takes no turn of a lane: it holds a stream share (`streams_per_lane`, and its frames per
second out of `stream_fps_per_lane`), so batch jobs keep running beside it. The frames of all the
streams of one model and forward-pass params on a lane go through shared forward passes
(`runners.stream_hub`). A restart of the server is not an attempt: the stream resumes by itself.
Source URLs may carry credentials: the spec keeps them for the runner, and shows each source
redacted (`domain.streams.redacted`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator

from yolo_orch.domain import Job, JobKind
from yolo_orch.domain.specs import StreamSource, StreamSpec
from yolo_orch.domain.stream_results import StreamResultDetail
from yolo_orch.domain.streams import is_network_source, redacted
from yolo_orch.errors import ErrorCode, InvalidJob
from yolo_orch.files.videos import is_video
from yolo_orch.kinds.base import JobRequest, Kind
from yolo_orch.kinds.submission import Submission, SubmissionChecks
from yolo_orch.params.inference import BOX_TASKS, check_task
from yolo_orch.params.stream import MAX_SOURCES, STREAM_TASKS, StreamParams


class StreamJobCreate(JobRequest):
    kind: Literal["stream"]
    sources: list[Annotated[str, Field(min_length=1, max_length=4096)]] = Field(
        min_length=1,
        max_length=MAX_SOURCES,
        description="rtsp://, rtsps://, http(s):// (MJPEG or HLS) URLs, whose hosts "
        "`stream_allowed_hosts` must allow, or videos under a data root (looped). Credentials "
        "in a URL are kept for the runner only: every response, log and page shows them as ***.",
    )
    params: StreamParams = Field(default_factory=StreamParams)

    @field_validator("sources")
    @classmethod
    def _sources_differ(cls, sources: list[str]) -> list[str]:
        if len(set(sources)) != len(sources):
            raise ValueError("each source once")
        return sources

    def spec(self) -> StreamSpec:
        return StreamSpec(
            sources=[StreamSource(url=source, name=redacted(source)) for source in self.sources],
            params=self.params.model_dump(exclude_none=True),
        )


async def _checked(submission: Submission[StreamSpec], checks: SubmissionChecks) -> StreamSpec:
    """Some lane takes the stream; the model's task fits its params and its `capture`'s
    dataset; network sources are allowed hosts, local ones readable videos under the data
    roots."""
    spec = submission.spec
    params = StreamParams.model_validate(spec.params)
    demand = params.max_fps * len(spec.sources)
    if demand > checks.stream_fps:
        where = (
            f"the lanes take streams of {checks.stream_fps:g} frames/s at most"
            if checks.stream_fps
            else "no lane of this server takes streams (nor do Ray lanes)"
        )
        raise InvalidJob(
            f"the stream asks {demand:g} frames/s (max_fps x sources), but {where}: see "
            "streams_per_lane and stream_fps_per_lane",
            code=ErrorCode.STREAM_UNSUPPORTED,
        )
    if submission.task is not None:
        if submission.task not in STREAM_TASKS:
            raise InvalidJob(
                f"the model's task is {submission.task!r}; streams run "
                f"{', '.join(STREAM_TASKS)} models",
                code=ErrorCode.TASK_MISMATCH,
            )
        check_task(spec.params, submission.task)
        if (params.zones or params.lines) and submission.task not in BOX_TASKS:
            raise InvalidJob(
                f"zones and lines count boxes: not {submission.task} models' results",
                code=ErrorCode.TASK_MISMATCH,
            )
    await checks.capture_into(spec.params.get("capture"), submission.task)
    sources: list[StreamSource] = []
    for source in spec.sources:
        if is_network_source(source.url) or "://" in source.url:
            checks.stream_hosts.check(source.url)
            sources.append(source)
            continue
        resolved = await checks.resolved_files([source.url])
        if len(resolved) != 1 or not is_video(Path(resolved[0].path)):
            raise InvalidJob(
                f"source {source.name!r}: a stream reads one video file, looped",
                code=ErrorCode.INVALID_INPUT,
            )
        await checks.readable_videos(resolved)
        resolved_file = resolved[0]
        sources.append(StreamSource(url=resolved_file.path, name=resolved_file.shown_name))
    return spec.model_copy(update={"sources": sources})


def stream_fps(job: Job) -> float:
    """The frames per second a stream asks of its lane: `max_fps` for each source."""
    spec = job.spec_as(StreamSpec)
    return float(spec.params.get("max_fps", StreamParams.model_fields["max_fps"].default)) * len(
        spec.sources
    )


STREAM = Kind(
    name=JobKind.STREAM,
    params=StreamParams,
    request=StreamJobCreate,
    result=StreamResultDetail,
    checked=_checked,
    stream_fps=stream_fps,
)
