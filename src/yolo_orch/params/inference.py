"""Inference job parameters, and the model tasks each one applies to.

A parameter whose field names `x-tasks` (in its JSON schema, so the OpenAPI document says it too)
applies to models of those tasks only; the others apply to every task. A job that gives a
parameter its model's task has no use for is refused at submission (`check_task`), and again by
the runner, rather than silently ignored."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import Field, JsonValue, model_validator
from pydantic.config import JsonDict

from yolo_orch.domain.managed_datasets import MANAGED_TASKS
from yolo_orch.errors import ErrorCode, InvalidJob
from yolo_orch.params.capture import CaptureParams
from yolo_orch.params.common import (
    IMGSZ_MAX,
    IMGSZ_MIN,
    MAX_CLASS_ID,
    SimulatedParams,
    StrictParams,
)
from yolo_orch.params.slicing import SLICE_TASKS, SliceParams, check_slice_task

INFERENCE_TASKS = ("detect", "segment", "semantic", "depth", "classify", "pose", "obb")
"""The model tasks inference jobs run: every task of ultralytics 8.4 (`ultralytics.cfg.TASKS`)."""

BOX_TASKS = ["detect", "segment", "pose", "obb"]
"""Tasks whose results are detections, filtered by confidence and non-maximum suppression."""

DEFAULT_TOP_K = 5
DEFAULT_MASK_FORMAT = "polygon"
DEFAULT_DEPTH_FORMAT = "npy"

InferenceFormat = Literal["auto", "pt", "onnx", "openvino", "torchscript", "engine"]
"""What runs a job: `auto` (the fastest variant the lane can run, else the `.pt`), the `.pt`
itself, or one exported format (`variants.ExportFormat`)."""


TrackerType = Literal["bytetrack", "botsort"]
"""The multi-object trackers of ultralytics (`ultralytics/cfg/trackers/{name}.yaml`) a video job
may use."""
MAX_VIDEO_SECONDS = 7 * 24 * 3600.0


def _tasks(*tasks: str) -> JsonDict:
    listed: list[JsonValue] = [*tasks]
    return {"x-tasks": listed}


def _botsort_only() -> JsonDict:
    listed: list[JsonValue] = ["botsort"]
    return {"x-trackers": listed}


class TrackerSettings(StrictParams):
    """Overrides of the tracker's own settings (`ultralytics/cfg/trackers/*.yaml`); a setting left
    out keeps the value of the tracker's shipped yaml. Only the keys of those files are accepted
    (a test holds this list to them), and the BoT-SORT ones only with `track: "botsort"`."""

    track_high_thresh: float | None = Field(
        default=None, ge=0, le=1, description="First-stage association score threshold."
    )
    track_low_thresh: float | None = Field(
        default=None, ge=0, le=1, description="Second-stage (low-score) association threshold."
    )
    new_track_thresh: float | None = Field(
        default=None, ge=0, le=1, description="Score a detection needs to start a new track."
    )
    track_buffer: int | None = Field(
        default=None, ge=1, le=100_000, description="Frames a lost track is kept to be found again."
    )
    match_thresh: float | None = Field(
        default=None, ge=0, le=1, description="Association cost threshold."
    )
    fuse_score: bool | None = Field(
        default=None, description="Fuse detection scores into the association cost."
    )
    gmc_method: Literal["sparseOptFlow", "orb", "sift", "ecc", "none"] | None = Field(
        default=None,
        description="BoT-SORT: global motion compensation (for moving cameras).",
        json_schema_extra=_botsort_only(),
    )
    proximity_thresh: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="BoT-SORT: IoU a track and a detection need to be matched by appearance.",
        json_schema_extra=_botsort_only(),
    )
    appearance_thresh: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="BoT-SORT: appearance similarity needed to match by appearance.",
        json_schema_extra=_botsort_only(),
    )
    with_reid: Literal[False] | None = Field(
        default=None,
        description="BoT-SORT: re-identification by appearance. Only false: ultralytics' ReID "
        "needs a model it would download, or hooks into the detector the server does not set.",
        json_schema_extra=_botsort_only(),
    )

    def overrides(self) -> dict[str, object]:
        """The settings given, by their yaml key."""
        return self.model_dump(exclude_none=True)


BOTSORT_SETTINGS = tuple(
    name
    for name, field in TrackerSettings.model_fields.items()
    if isinstance(field.json_schema_extra, dict) and "x-trackers" in field.json_schema_extra
)


class ForwardPassParams(SimulatedParams):
    """The params of one forward pass (`FORWARD_PASS_PARAMS`, plus `max_det`), which inference
    and stream jobs share."""

    imgsz: int = Field(default=640, ge=IMGSZ_MIN, le=IMGSZ_MAX, description="Inference image size.")
    conf: float = Field(
        default=0.25,
        ge=0,
        le=1,
        description="Confidence threshold.",
        json_schema_extra=_tasks(*BOX_TASKS),
    )
    iou: float = Field(
        default=0.7,
        ge=0,
        le=1,
        description="NMS IoU threshold.",
        json_schema_extra=_tasks(*BOX_TASKS),
    )
    max_det: int = Field(
        default=300,
        ge=1,
        le=1_000,
        description="Detections per image, at most.",
        json_schema_extra=_tasks(*BOX_TASKS),
    )
    classes: list[Annotated[int, Field(ge=0, le=MAX_CLASS_ID)]] | None = Field(
        default=None,
        max_length=10_000,
        description="Keep only these class ids (semantic: other pixels get no class).",
        json_schema_extra=_tasks(*BOX_TASKS, "semantic"),
    )
    half: bool = Field(
        default=False,
        description="FP16 on CUDA lanes; on the cpu lane, a half OpenVINO variant (run in the "
        "CPU's 16-bit type), else ignored.",
    )
    format: InferenceFormat = Field(
        default="auto",
        description='"auto": the fastest variant of the model the lane can run for this imgsz '
        'and half (TensorRT on CUDA, OpenVINO then ONNX on the CPU), else the .pt; "pt": the .pt; '
        "or one exported format, refused at submission when the model has no variant of it.",
    )


class InferenceParams(ForwardPassParams):
    save_annotated: bool = Field(
        default=False,
        description="Keep annotated images as artifacts (videos: one mp4, MPEG-4 Part 2 `mp4v`).",
    )
    vid_stride: int = Field(
        default=1, ge=1, le=10_000, description="Videos: run every Nth frame of the time window."
    )
    max_frames: int | None = Field(
        default=None, ge=1, le=100_000_000, description="Videos: run at most this many frames each."
    )
    start_s: float = Field(
        default=0,
        ge=0,
        le=MAX_VIDEO_SECONDS,
        description="Videos: the time window starts at this second (frame index / fps).",
    )
    end_s: float | None = Field(
        default=None,
        gt=0,
        le=MAX_VIDEO_SECONDS,
        description="Videos: the time window ends before this second (unset: the end).",
    )
    track: TrackerType | None = Field(
        default=None,
        description='Videos: follow objects across frames with ultralytics\' "bytetrack" or '
        '"botsort"; each detection then carries its `track_id`.',
        json_schema_extra=_tasks(*BOX_TASKS),
    )
    tracker: TrackerSettings | None = Field(
        default=None,
        description="With `track`: the tracker's own settings, checked against its yaml.",
        json_schema_extra=_tasks(*BOX_TASKS),
    )
    mask_format: Literal["polygon", "rle", "none"] | None = Field(
        default=None,
        description='Segment: each detection\'s mask as "polygon" rings of [x, y] (the default), '
        'COCO "rle" at the image\'s size, or "none".',
        json_schema_extra=_tasks("segment"),
    )
    top_k: int | None = Field(
        default=None,
        ge=1,
        le=1000,
        description=f"Classify: how many classes per image, best first (default {DEFAULT_TOP_K}).",
        json_schema_extra=_tasks("classify"),
    )
    depth_format: Literal["npy", "png16"] | None = Field(
        default=None,
        description='Depth: the depth map artifact as float32 metres in "npy" (the default), or '
        '"png16": a 16-bit PNG of millimetres (65.535 m at most).',
        json_schema_extra=_tasks("depth"),
    )
    capture: CaptureParams | None = Field(
        default=None,
        description="Store the images `when` selects, with the model's predictions as their "
        "labels, in a managed dataset (docs/capture.md); not a video's frames.",
        json_schema_extra=_tasks(*MANAGED_TASKS),
    )
    slice: SliceParams | None = Field(
        default=None,
        description="Images: cut each image into overlapping tiles run at imgsz, and merge "
        "their detections in full-image coordinates (small objects in large images; "
        "docs/slicing.md).",
        json_schema_extra=_tasks(*SLICE_TASKS),
    )

    @model_validator(mode="after")
    def _check_video_params(self) -> InferenceParams:
        if self.end_s is not None and self.end_s <= self.start_s:
            raise ValueError("params.end_s must be after params.start_s")
        check_tracker(self.track, self.tracker)
        return self


def check_tracker(track: TrackerType | None, tracker: TrackerSettings | None) -> None:
    """`tracker` needs `track`, and BoT-SORT's own settings need BoT-SORT."""
    if tracker is None:
        return
    if track is None:
        raise ValueError("params.tracker needs params.track")
    given = tracker.overrides()
    foreign = [name for name in BOTSORT_SETTINGS if name in given]
    if track != "botsort" and foreign:
        raise ValueError(f"{', '.join(foreign)}: BoT-SORT settings, not {track}'s")


def applicable_tasks(name: str) -> tuple[str, ...]:
    """The tasks an inference parameter applies to."""
    extra = InferenceParams.model_fields[name].json_schema_extra
    tasks = extra.get("x-tasks") if isinstance(extra, dict) else None
    return tuple(str(task) for task in tasks) if isinstance(tasks, list) else INFERENCE_TASKS


def check_task(params: Mapping[str, object], task: str) -> None:
    """Refuse (`task_mismatch`) a model task inference cannot run, and parameters the task has no
    use for. `params` as stored: a parameter left at its default is not one the client asked for."""
    if task not in INFERENCE_TASKS:
        raise InvalidJob(
            f"the model's task is {task!r}; inference runs {', '.join(INFERENCE_TASKS)} models",
            code=ErrorCode.TASK_MISMATCH,
        )
    fields = InferenceParams.model_fields
    unused = sorted(
        name
        for name, value in params.items()
        if name in fields and value != fields[name].default and task not in applicable_tasks(name)
    )
    if unused:
        verb = "does" if len(unused) == 1 else "do"
        raise InvalidJob(
            f"{', '.join(f'params.{name}' for name in unused)} {verb} not apply to {task} models",
            code=ErrorCode.TASK_MISMATCH,
        )
    check_slice_task(params, task)


FORWARD_PASS_PARAMS = ("imgsz", "half", "format", "conf", "iou", "max_det", "classes")
"""The params one forward pass runs with (one ultralytics `predict` call: its letterbox, precision,
model variant and the NMS its predictor applies to the whole batch). Jobs of one model share a
forward pass only when all of these are equal; every other param is applied to each job's own
results."""


def forward_pass_key(params: Mapping[str, object]) -> tuple[object, ...]:
    """What jobs of one model must have in common to share a forward pass, from their stored
    params (a param left out is at its default)."""
    fields = InferenceParams.model_fields
    values = (params.get(name, fields[name].default) for name in FORWARD_PASS_PARAMS)
    return tuple(tuple(value) if isinstance(value, list) else value for value in values)
