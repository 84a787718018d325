"""Inference: a model's predictions for images and videos, named under a data root (globs
allowed) or uploaded (POST /v1/jobs/inference). Jobs of one model and forward-pass params share
forward passes (`dispatch.batching`); a video's frames are batched within its own job."""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from yolo_orch.domain import Job, JobKind
from yolo_orch.domain.results import InferenceResultDetail
from yolo_orch.domain.specs import InferenceSpec, ResolvedFile
from yolo_orch.errors import ErrorCode, InvalidJob
from yolo_orch.files.videos import is_video
from yolo_orch.kinds.base import JobRequest, Kind
from yolo_orch.kinds.submission import Submission, SubmissionChecks
from yolo_orch.params.inference import InferenceParams, check_task, forward_pass_key


class InferenceJobCreate(JobRequest):
    kind: Literal["inference"]
    inputs: list[Annotated[str, Field(min_length=1, max_length=4096)]] = Field(
        min_length=1,
        max_length=10_000,
        description="Image or video paths relative to a data root; globs allowed.",
    )
    params: InferenceParams = Field(default_factory=InferenceParams)

    def spec(self) -> InferenceSpec:
        return InferenceSpec(inputs=self.inputs, params=self.params.model_dump(exclude_none=True))


async def _checked(
    submission: Submission[InferenceSpec], checks: SubmissionChecks
) -> InferenceSpec:
    """The model's task fits the params and it can run the format asked for; the inputs are
    readable files (uploads come with theirs; `sim` reads none); their videos can be read;
    `capture` names a dataset of the model's task, and comes with images only."""
    spec, model = submission.spec, submission.model
    if model is not None:
        check_task(spec.params, model.task)
        await checks.format_available(model, spec.params)
    await checks.capture_into(spec.params.get("capture"), submission.task)
    files = spec.files
    if files is None:
        if submission.simulated:
            files = [ResolvedFile(path=name, name=name) for name in spec.inputs]
        else:
            files = await checks.resolved_files(spec.inputs)
        spec = spec.model_copy(update={"files": files})
    # Named by their suffix: a job of images only needs no thread hop for this.
    videos = any(is_video(Path(file.path)) for file in files)
    if videos and "capture" in spec.params:
        raise InvalidJob(
            "capture takes an inference job's images, not a video's frames: run the video as "
            "a stream (a local video is looped) with capture and max_frames",
            code=ErrorCode.INVALID_INPUT,
        )
    if videos and "slice" in spec.params:
        raise InvalidJob(
            "params.slice cuts images into tiles, not a video's frames",
            code=ErrorCode.INVALID_INPUT,
        )
    if model is not None and videos:
        await checks.readable_videos(files)
    return spec


def _files(job: Job) -> list[ResolvedFile]:
    return job.spec_as(InferenceSpec).files or []


def _batch_key(job: Job) -> Hashable | None:
    if any(is_video(Path(file.path)) for file in _files(job)):
        return None  # a video's frames are batched within its own job
    # sliced jobs share passes only with jobs sliced the same way
    sliced = job.params.get("slice")
    slicing = tuple(sorted(sliced.items())) if isinstance(sliced, dict) else None
    return (job.model_id or job.model, forward_pass_key(job.params), slicing)


def _images(job: Job) -> int:
    """The images the job puts through the forward pass (resolved at submission)."""
    return len(_files(job)) or 1


INFERENCE = Kind(
    name=JobKind.INFERENCE,
    params=InferenceParams,
    request=InferenceJobCreate,
    result=InferenceResultDetail,
    checked=_checked,
    batch_key=_batch_key,
    images=_images,
    warm_lane_actor=True,
    ships_inputs=True,
)
