"""Validation job parameters."""

from __future__ import annotations

from pydantic import Field

from yolo_orch.params.common import IMGSZ_MAX, IMGSZ_MIN, SimulatedParams


class ValidationParams(SimulatedParams):
    imgsz: int = Field(
        default=640, ge=IMGSZ_MIN, le=IMGSZ_MAX, description="Validation image size."
    )
    batch: int = Field(default=16, ge=1, le=1024, description="Images per batch.")
    conf: float = Field(
        default=0.001, ge=0, le=1, description="Confidence threshold (low, as mAP needs)."
    )
    iou: float = Field(default=0.7, ge=0, le=1, description="NMS IoU threshold.")
