"""Export job parameters."""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import BeforeValidator, Field, model_validator

from yolo_orch.domain.variants import INT8_FORMATS, SIMPLIFY_FORMATS, ExportFormat
from yolo_orch.params.common import EXPORT_BATCH_MAX, IMGSZ_MAX, IMGSZ_MIN, SimulatedParams

STRIDE = 32
"""YOLO's largest stride: ultralytics rounds other sizes up, which would make the lineage lie."""

MAX_INPUT_BYTES = 256 << 20
"""The largest input tensor an export (or an imported variant) may be built for: batch x 3
channels x imgsz x imgsz of float32. The exporter's dry run, the import check and every call of
a static variant feed a tensor this size, and the activations behind it are many times larger:
past it an export is a refused allocation, not a variant (imgsz 4096 with batch 1024 is 192
GiB). 256 MiB keeps imgsz 640 at batch 32 (150 MiB), 1280 at batch 8 and 4096 at batch 1."""
_FLOAT32_RGB = 3 * 4


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
        default=1,
        ge=1,
        le=EXPORT_BATCH_MAX,
        description="Batch size the variant is built for. batch x 3 x imgsz x imgsz float32 "
        f"must fit {MAX_INPUT_BYTES >> 20} MiB (imgsz 640: batch 32 and less).",
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
        if reason := input_refusal(self.imgsz, self.batch):
            raise ValueError(reason)
        return self


def input_refusal(imgsz: int, batch: int) -> str | None:
    """Why a variant of this size and batch is refused (`MAX_INPUT_BYTES`), or None."""
    size = batch * _FLOAT32_RGB * imgsz * imgsz
    if size <= MAX_INPUT_BYTES:
        return None
    return (
        f"imgsz {imgsz} with batch {batch} is an input of {batch} x 3 x {imgsz} x {imgsz} "
        f"float32 = {size} bytes ({size / (1 << 20):.0f} MiB); at most {MAX_INPUT_BYTES} "
        f"bytes ({MAX_INPUT_BYTES >> 20} MiB): lower imgsz or batch"
    )


def _names(formats: frozenset[ExportFormat]) -> str:
    return " and ".join(sorted(formats))
