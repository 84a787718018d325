"""Export job parameters."""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import BeforeValidator, Field, model_validator

from yolo_orch.params.common import EXPORT_BATCH_MAX, IMGSZ_MAX, IMGSZ_MIN, SimulatedParams
from yolo_orch.variants import INT8_FORMATS, SIMPLIFY_FORMATS, ExportFormat

STRIDE = 32
"""YOLO's largest stride: ultralytics rounds other sizes up, which would make the lineage lie."""


def _as_format(value: object) -> object:
    known = {str(f): f for f in ExportFormat}
    return known.get(value, value) if isinstance(value, str) else value


ExportFormatParam = Annotated[ExportFormat, BeforeValidator(_as_format)]
"""Stored params hold a format as its string; the before-validator makes it the enum that
strict validation (`from_job`) expects."""


class ExportParams(SimulatedParams):
    format: ExportFormatParam = Field(
        description="onnx, openvino, torchscript, or engine (TensorRT; CUDA lanes only)."
    )
    imgsz: int = Field(
        default=640,
        ge=IMGSZ_MIN,
        le=IMGSZ_MAX,
        multiple_of=STRIDE,
        description="Input size the variant is built for (static unless `dynamic`).",
    )
    half: bool = Field(default=False, description="FP16 weights.")
    int8: bool = Field(
        default=False,
        description="INT8 quantisation (openvino, engine), calibrated on the job's `dataset`.",
    )
    dynamic: bool = Field(default=False, description="Dynamic input shapes (any imgsz, batch).")
    batch: int = Field(
        default=1, ge=1, le=EXPORT_BATCH_MAX, description="Batch size the variant is built for."
    )
    simplify: bool | None = Field(
        default=None,
        description="Simplify the ONNX graph with onnxslim (onnx, engine; default true).",
    )

    @model_validator(mode="after")
    def _options_fit_the_format(self) -> Self:
        if self.half and self.int8:
            raise ValueError("half and int8 exclude each other")
        if self.int8 and self.format not in INT8_FORMATS:
            raise ValueError(f"int8 applies to {_names(INT8_FORMATS)} only")
        if self.simplify is not None and self.format not in SIMPLIFY_FORMATS:
            raise ValueError(f"simplify applies to {_names(SIMPLIFY_FORMATS)} only")
        return self


def _names(formats: frozenset[ExportFormat]) -> str:
    return " and ".join(sorted(formats))
