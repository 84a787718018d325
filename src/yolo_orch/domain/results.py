"""The shapes of a job's full result (GET /v1/jobs/{id}/result): an inference job's, one per
model task, and those of the other kinds.

The route serves the stored result file as it is; these models describe it in the OpenAPI
document, and the tests validate every task's real result against them, so they stay true to
`runners/encode.py`, which writes the entries.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

from yolo_orch.domain.stream_results import StreamResultDetail
from yolo_orch.domain.tune_results import TuneResultDetail


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Box(_Shape):
    """Axis-aligned, in the original image's pixels."""

    x1: float
    y1: float
    x2: float
    y2: float


class Detection(_Shape):
    class_id: int
    class_name: str
    confidence: float
    box: Box
    track_id: int | None = Field(
        default=None, description="Video frames with `params.track`: the object's track."
    )


class RunLength(_Shape):
    size: tuple[int, int] = Field(description="[height, width] of the image.")
    counts: str = Field(description="COCO compressed RLE counts (pycocotools' `mask.decode`).")


class MaskPolygons(_Shape):
    polygons: list[list[tuple[float, float]]] = Field(
        description="One ring of [x, y] per separate part of the mask, in image pixels."
    )


class MaskRle(_Shape):
    rle: RunLength


class SegmentDetection(Detection):
    mask: MaskPolygons | MaskRle | None = Field(
        default=None, description='Per `params.mask_format`; absent with "none".'
    )


class PoseDetection(Detection):
    keypoints: list[tuple[float, float, float | None]] = Field(
        description="[x, y, confidence] per keypoint in the model's order (confidence null "
        "for models whose keypoints have none)."
    )
    keypoint_names: list[str] | None = Field(
        default=None, description="Where the model's metadata names its keypoints."
    )


class OrientedBox(_Shape):
    cx: float
    cy: float
    w: float
    h: float
    rotation: float = Field(description="Radians.")
    points: list[tuple[float, float]] = Field(
        min_length=4, max_length=4, description="The four corners, [x, y] each."
    )


class ObbDetection(_Shape):
    class_id: int
    class_name: str
    confidence: float
    obb: OrientedBox
    track_id: int | None = Field(
        default=None, description="Video frames with `params.track`: the object's track."
    )


class ClassScore(_Shape):
    class_id: int
    class_name: str
    confidence: float


class ClassShare(_Shape):
    class_id: int
    class_name: str
    pixel_ratio: float = Field(description="Share of the image's pixels given this class.")


class DepthStats(_Shape):
    """Metres, over the finite pixels."""

    min: float
    mean: float
    max: float


class _Image(_Shape):
    source: str = Field(description="The input as the client named it.")
    width: int
    height: int
    annotated: str | None = Field(
        default=None, description="With `save_annotated`: the annotated image's artifact name."
    )


class DetectImage(_Image):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "source": "shots/a.jpg",
                    "width": 640,
                    "height": 480,
                    "detections": [
                        {
                            "class_id": 0,
                            "class_name": "car",
                            "confidence": 0.91,
                            "box": {"x1": 12.5, "y1": 40.0, "x2": 210.3, "y2": 180.9},
                        }
                    ],
                }
            ]
        },
    )

    detections: list[Detection]


class SegmentImage(_Image):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "source": "shots/a.jpg",
                    "width": 640,
                    "height": 480,
                    "detections": [
                        {
                            "class_id": 0,
                            "class_name": "car",
                            "confidence": 0.91,
                            "box": {"x1": 12.5, "y1": 40.0, "x2": 210.3, "y2": 180.9},
                            "mask": {"polygons": [[[14.0, 41.0], [209.0, 43.0], [205.0, 179.0]]]},
                        }
                    ],
                }
            ]
        },
    )

    detections: list[SegmentDetection]


class PoseImage(_Image):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "source": "shots/a.jpg",
                    "width": 640,
                    "height": 480,
                    "detections": [
                        {
                            "class_id": 0,
                            "class_name": "person",
                            "confidence": 0.88,
                            "box": {"x1": 80.0, "y1": 30.0, "x2": 160.0, "y2": 300.0},
                            "keypoints": [[101.2, 55.0, 0.97], [96.4, 50.1, 0.95]],
                            "keypoint_names": ["nose", "left_eye"],
                        }
                    ],
                }
            ]
        },
    )

    detections: list[PoseDetection]


class ObbImage(_Image):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "source": "shots/a.jpg",
                    "width": 640,
                    "height": 480,
                    "detections": [
                        {
                            "class_id": 1,
                            "class_name": "ship",
                            "confidence": 0.8,
                            "obb": {
                                "cx": 320.0,
                                "cy": 200.0,
                                "w": 120.0,
                                "h": 40.0,
                                "rotation": 0.52,
                                "points": [
                                    [278.2, 153.4],
                                    [382.1, 213.4],
                                    [361.8, 246.6],
                                    [257.9, 186.6],
                                ],
                            },
                        }
                    ],
                }
            ]
        },
    )

    detections: list[ObbDetection] = Field(description="Rotated boxes instead of `box`.")


class ClassifyImage(_Image):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "source": "shots/a.jpg",
                    "width": 640,
                    "height": 480,
                    "classes": [
                        {"class_id": 3, "class_name": "tabby", "confidence": 0.82},
                        {"class_id": 5, "class_name": "tiger cat", "confidence": 0.11},
                    ],
                }
            ]
        },
    )

    classes: list[ClassScore] = Field(description="The top `params.top_k`, best first.")


class SemanticImage(_Image):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "source": "shots/a.jpg",
                    "width": 640,
                    "height": 480,
                    "classes": [
                        {"class_id": 0, "class_name": "road", "pixel_ratio": 0.61},
                        {"class_id": 2, "class_name": "car", "pixel_ratio": 0.39},
                    ],
                    "map": "00000_a_classes.png",
                }
            ]
        },
    )

    classes: list[ClassShare]
    map: str = Field(description="Artifact: the class-index map as a PNG (16-bit past 256).")


class DepthImage(_Image):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "source": "shots/a.jpg",
                    "width": 640,
                    "height": 480,
                    "depth": {"min": 0.8, "mean": 4.2, "max": 19.7},
                    "map": "00000_a_depth.npy",
                }
            ]
        },
    )

    depth: DepthStats | None = Field(description="null when no pixel has a finite depth.")
    map: str = Field(
        description='Artifact: float32 metres as `.npy`, or with `depth_format: "png16"` a '
        "16-bit PNG of millimetres."
    )


class VideoSummary(_Shape):
    fps: float
    frame_count: int | None = Field(description="What the container declares (null: nothing).")
    frames: int = Field(description="Frames run: the window's, every `vid_stride`th.")
    first_frame: int | None
    last_frame: int | None
    vid_stride: int


class TrackSpan(_Shape):
    track_id: int
    class_id: int = Field(description="The class the track was first seen with.")
    class_name: str
    first_frame: int
    last_frame: int
    frames: int = Field(description="Frames it was tracked on.")


class Tracks(_Shape):
    count: int
    per_class: dict[str, int] = Field(description="Distinct tracks per class name.")
    tracks: list[TrackSpan]


class VideoEntry(_Shape):
    """A video input: its summary; its frames are in the `frames` artifact (JSON Lines: one
    `{"frame", "time_s", ...}` a line, with the fields of the task's image entries), and pages of
    them at `GET /v1/jobs/{id}/result?entry=N`."""

    source: str
    width: int
    height: int
    video: VideoSummary
    frames: str = Field(description="Artifact: the per-frame results, JSON Lines.")
    detections_total: int | None = Field(default=None, description="Box tasks: over all frames.")
    tracks: Tracks | None = Field(default=None, description="With `params.track`.")
    annotated: str | None = Field(default=None, description="With `save_annotated`: the mp4.")
    annotated_codec: Literal["mp4v"] | None = Field(
        default=None, description="MPEG-4 Part 2: the encoder OpenCV has here (no H.264)."
    )


class ImageError(_Shape):
    source: str
    error: str = Field(description="Why the image could not be read; the job still succeeds.")


ImageResult = (
    DetectImage
    | SegmentImage
    | PoseImage
    | ObbImage
    | ClassifyImage
    | SemanticImage
    | DepthImage
    | VideoEntry
    | ImageError
)


class InferenceResultDetail(_Shape):
    images: list[ImageResult] = Field(description="In input order; the shape is the model task's.")


class ConfusionMatrix(_Shape):
    names: list[str] = Field(description="Class names; box tasks end with `background`.")
    rows: Literal["predicted"]
    columns: Literal["true"]
    matrix: list[list[float]]


class ValidationResultDetail(_Shape):
    task: str
    split: Literal["val", "test"]
    images: int
    metrics: dict[str, float | None] = Field(
        description="What the task has: `precision`, `recall`, `mAP50`, `mAP50-95` for boxes, "
        "`mask_...` and `pose_...` beside them; `top1`, `top5`; `mIoU`, `pixel_acc`; `delta1`, "
        "`abs_rel`, `rmse`, ..."
    )
    per_class: list[dict[str, Any]] = Field(description="One row per class, as in the CSV.")
    confusion_matrix: ConfusionMatrix | None = Field(description="Null for depth.")
    curves: list[dict[str, Any]] = Field(
        default_factory=list,
        description="The PR, F1, P and R curves (boxes, masks, keypoints): `{name, x_label, "
        "y_label, x, y: {class name: values}}`, 101 points each; empty for classify, semantic "
        "segmentation and depth.",
    )
    speed_ms_per_image: dict[str, float]
    artifacts: list[str] = Field(description="`per_class.csv` and ultralytics' plots (PNG).")


class TrainingResultDetail(_Shape):
    model: dict[str, Any] | None = Field(
        description="The produced model, as GET /v1/models/{ref} (null: the simulated runtime)."
    )
    epochs: int
    metrics: dict[str, Any] = Field(description="The final epoch's scores.")
    history: list[dict[str, Any]] = Field(description="Per epoch, as GET /v1/jobs/{id}/metrics.")
    artifacts: list[str] = Field(description="`best.pt`, `last.pt`, `results.csv`.")
    variants: list[dict[str, Any]] | None = Field(
        default=None, description="With `params.export`: the variants made at the end."
    )


class ExportResultDetail(_Shape):
    model_id: str | None
    variant_id: str | None
    format: str
    variant: dict[str, Any] | None = Field(description="As listed by GET /v1/models/{ref}.")


class PromoteResultDetail(_Shape):
    promoted: bool
    alias: str
    from_model_id: str | None = Field(description="Where the alias pointed before.")
    to_model_id: str | None = Field(description="The model promoted (null: none was).")
    gate: dict[str, Any] | None = Field(
        description="The figures that decided: metric, min, candidate, baseline, passed, reasons."
    )
    reason: str | None = Field(description="Why nothing was promoted, if nothing was.")


class JobResultDetail(
    RootModel[
        InferenceResultDetail
        | ValidationResultDetail
        | TrainingResultDetail
        | ExportResultDetail
        | StreamResultDetail
        | PromoteResultDetail
        | TuneResultDetail
    ]
):
    """By the job's kind: inference, per image, the model task's result; validation, the task's
    metrics; training, the produced model and its epochs; export, the variant made; stream,
    its counters and counts; tune, its trials and the best."""
