"""Inference job parameters."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from yolo_orch.params.common import MAX_CLASS_ID, SimulatedParams


class InferenceParams(SimulatedParams):
    imgsz: int = Field(default=640, ge=32, le=4096, description="Inference image size.")
    conf: float = Field(default=0.25, ge=0, le=1, description="Confidence threshold.")
    iou: float = Field(default=0.7, ge=0, le=1, description="NMS IoU threshold.")
    max_det: int = Field(default=300, ge=1, le=1_000, description="Detections per image, at most.")
    classes: list[Annotated[int, Field(ge=0, le=MAX_CLASS_ID)]] | None = Field(
        default=None, max_length=10_000, description="Keep only these class ids."
    )
    half: bool = Field(default=False, description="FP16 (CUDA lanes only).")
    save_annotated: bool = Field(default=False, description="Keep annotated images as artifacts.")
