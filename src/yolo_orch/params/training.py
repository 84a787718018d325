"""Training job parameters."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from yolo_orch.domain import MODEL_NAME_MAX_LENGTH, MODEL_NAME_PATTERN
from yolo_orch.params.common import IMGSZ_MAX, IMGSZ_MIN, SimulatedParams
from yolo_orch.params.export import ExportFormatParam


class TrainingParams(SimulatedParams):
    epochs: int = Field(default=100, ge=1, le=10_000)
    imgsz: int = Field(default=640, ge=IMGSZ_MIN, le=IMGSZ_MAX)
    batch: int = Field(default=16, ge=1, le=4096)
    patience: int = Field(
        default=100, ge=0, le=10_000, description="Epochs without improvement before stopping."
    )
    lr0: float = Field(default=0.01, gt=0, le=1)
    optimizer: Literal[
        "auto", "SGD", "MuSGD", "Adam", "Adamax", "AdamW", "NAdam", "RAdam", "RMSprop"
    ] = "auto"
    seed: int = Field(default=0, ge=0, le=2**31 - 1)
    workers: int = Field(
        default=0,
        ge=0,
        le=64,
        description="DataLoader worker processes (started with forkserver); 0 loads batches in "
        "the job's own thread.",
    )
    output_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=MODEL_NAME_MAX_LENGTH,
        pattern=MODEL_NAME_PATTERN,
        description="Name of the produced model (default: train-<first 8 of the job id>).",
    )
    export: list[ExportFormatParam] = Field(
        default_factory=list,
        max_length=4,
        description="Formats to export the produced model to, in the same job (its variants).",
    )
