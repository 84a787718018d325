"""Exported variants of a registry model, and which one a lane runs. Plain values and rules only:
no I/O, no torch.

A variant is one export of a `.pt` model (ONNX, OpenVINO, TorchScript or a TensorRT engine) with
its own id, a fingerprint over all its files, and its lineage: what it was built from, with which
options, for which device and software.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from yolo_orch.errors import ErrorCode, InvalidJob


class ExportFormat(enum.StrEnum):
    ONNX = "onnx"
    OPENVINO = "openvino"
    TORCHSCRIPT = "torchscript"
    ENGINE = "engine"
    """TensorRT: built on the CUDA lane that will run it, for that GPU model and software."""


IMPORTABLE_FORMATS = frozenset({ExportFormat.ONNX, ExportFormat.OPENVINO})
"""Loading these runs no code from the files, so a client may upload them. A TorchScript
archive or a TensorRT engine is deserialised into executable code: only the server's own exports
are trusted."""

ENTRY_NAMES = {
    ExportFormat.ONNX: "model.onnx",
    ExportFormat.OPENVINO: "model_openvino_model",
    ExportFormat.TORCHSCRIPT: "model.torchscript",
    ExportFormat.ENGINE: "model.engine",
}
"""What a variant's folder holds: one file, or (OpenVINO) one folder. ultralytics tells formats
apart by these names."""

UNIMPORTABLE_SUFFIXES = {
    ".torchscript": ExportFormat.TORCHSCRIPT,
    ".engine": ExportFormat.ENGINE,
    ".plan": ExportFormat.ENGINE,
}

REPRODUCTION_TOLERANCES = {"fp32": 1e-2, "half": 5e-2, "int8": 2e-1}
"""How far a variant's raw outputs may be from its `.pt`'s on the import check's probe
(`runners.variant_check`: the largest RMS difference of a channel relative to the `.pt`'s RMS
there), by the variant's precision. Measured on the CPU with untrained yolo11n models whose
activations do not vanish, at imgsz 64: FP32 ONNX and OpenVINO (compiled f32) under 1e-6; FP16
under 1e-3 (OpenVINO in the CPU's bfloat16: 5e-3); INT8 OpenVINO 3e-3; a variant of the same
architecture with other weights 0.5 to 3.4. TensorRT's TF32 and trained models' INT8 sit
further out: the bounds leave them room and stay below other weights."""
INT8_FORMATS = frozenset({ExportFormat.OPENVINO, ExportFormat.ENGINE})
SIMPLIFY_FORMATS = frozenset({ExportFormat.ONNX, ExportFormat.ENGINE})
"""Formats built through an ONNX graph that onnxslim can simplify."""


@dataclass(frozen=True)
class Lineage:
    """What a variant was built from and for."""

    source_sha256: str
    """The `.pt` it was exported from, or (imported) the one it reproduced at import; empty
    for a variant imported before imports were checked."""
    imgsz: int
    half: bool
    int8: bool
    dynamic: bool
    """Dynamic input shapes: it runs any image size; else only `imgsz`."""
    batch: int
    device: str | None
    """The lane it was built on (`cpu`, `cuda:0`); None when imported."""
    gpu_name: str | None = None
    compute_capability: str | None = None
    """`8.9`-style, for CUDA builds."""
    tensorrt_version: str | None = None
    ultralytics_version: str | None = None


@dataclass(frozen=True)
class NewVariant:
    """Fingerprinted files, already in place, about to be registered."""

    model_id: str
    format: ExportFormat
    sha256: str
    """The digest over the manifest (see `manifests.py`)."""
    size_bytes: int
    files: Mapping[str, str]
    """The manifest: each file's path inside the variant's folder and its SHA-256."""
    lineage: Lineage
    source: str
    """`export:<job id>`, `training:<job id>`, `upload` or `path:<absolute path>`."""
    job_id: str | None = None
    """The job that built it: the same job registering again (a rerun after a crash) gets the
    variant it registered before."""
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    """Chosen before registration: it names the variant's folder."""


@dataclass(frozen=True)
class Variant:
    id: str
    model_id: str
    format: ExportFormat
    sha256: str
    size_bytes: int
    files: Mapping[str, str]
    lineage: Lineage
    source: str
    job_id: str | None
    created_at: datetime
    usable: bool = True
    """False once its files no longer matched their fingerprints at load time, or once it failed
    `variant_retire_after_failures` consecutive jobs."""
    unusable_reason: str | None = None
    """Why it is no longer usable."""


@dataclass(frozen=True)
class LaneRuntime:
    """What a lane can run: its device and the runtimes installed on this host."""

    lane: str
    """`cpu` or `cuda:N`."""
    runnable: frozenset[ExportFormat]
    """Formats whose runtime package is installed (onnxruntime, openvino, tensorrt)."""
    gpu_name: str | None = None
    compute_capability: str | None = None
    tensorrt_version: str | None = None
    ultralytics_version: str | None = None

    @property
    def is_cuda(self) -> bool:
        return self.lane.startswith("cuda:")


_CPU_PREFERENCE = (ExportFormat.OPENVINO, ExportFormat.ONNX)
"""Fastest first, as measured on a 2-core CPU at imgsz 320: OpenVINO 2.9x PyTorch, ONNX Runtime
1.45x (ULTRALYTICS.md)."""


def choose_variant(
    variants: Sequence[Variant], lane: LaneRuntime, *, imgsz: int, half: bool
) -> Variant | None:
    """The variant `format: auto` runs on `lane`, or None for the `.pt` itself.

    On a CUDA lane: a TensorRT engine built for the same GPU model, compute capability, TensorRT
    and ultralytics versions. On a CPU lane: OpenVINO, then ONNX. Either way the variant must run
    the job's `imgsz` (dynamic, or built for that size) and `half` (`variant_fits`). INT8
    variants trade accuracy for speed and are never picked automatically. Within a format the
    fastest shape comes first (`_fastest_first`); `variants` come newest first, and among equals
    the newest wins.
    """
    fitting = _fastest_first(
        variant
        for variant in variants
        if variant.format in lane.runnable
        and not variant.lineage.int8
        and variant_fits(variant, imgsz=imgsz, half=half, cuda=lane.is_cuda)
    )
    if lane.is_cuda:
        return next((v for v in fitting if _engine_fits(v, lane)), None)
    for wanted in _CPU_PREFERENCE:
        for variant in fitting:
            if variant.format is wanted:
                return variant
    return None


def variant_fits(variant: Variant, *, imgsz: int, half: bool, cuda: bool) -> bool:
    """Whether `variant` runs a job of this `imgsz` (dynamic, or built for it) and `half` on a
    lane (`cuda` or not): FP16 applies on CUDA lanes, and on the cpu lane to OpenVINO alone, which
    runs a half variant at the CPU's own 16-bit precision (`runners.formats`); elsewhere on
    the cpu lane a job's `half` is ignored, as for `.pt` jobs."""
    built = variant.lineage
    takes_half = half and (cuda or variant.format is ExportFormat.OPENVINO)
    return variant.usable and built.half == takes_half and (built.dynamic or built.imgsz == imgsz)


def named_variant(
    variants: Sequence[Variant],
    export_format: ExportFormat,
    lane: LaneRuntime,
    *,
    imgsz: int,
    half: bool,
) -> Variant | None:
    """The variant a job that names `export_format` runs on `lane`: the newest that fits the
    job (and, for an engine, the lane's GPU and software), full precision before INT8, and the
    fastest shape first (`_fastest_first`)."""
    fitting = _fastest_first(
        variant
        for variant in variants
        if variant.format is export_format
        and variant_fits(variant, imgsz=imgsz, half=half, cuda=lane.is_cuda)
        and (export_format is not ExportFormat.ENGINE or _engine_fits(variant, lane))
    )
    return min(fitting, key=lambda variant: variant.lineage.int8, default=None)


def variant_for(
    variants: Sequence[Variant], wanted: str, lane: LaneRuntime, *, imgsz: int, half: bool
) -> Variant | None:
    """The variant a job whose `params.format` is `wanted` runs on `lane`, or None for the
    `.pt`: `auto` picks by `choose_variant`, a named format by `named_variant`, and a named
    format with no fitting variant (retired or deleted since submission, or built for another
    GPU) raises `format_not_available`. The one rule for every executor: a thread lane applies
    it to the registry's variants, a Ray server to pick what travels to the node, and the
    node's runner again to what arrived."""
    if wanted == "pt":
        return None
    if wanted == "auto":
        return choose_variant(variants, lane, imgsz=imgsz, half=half)
    export_format = ExportFormat(wanted)
    picked = named_variant(variants, export_format, lane, imgsz=imgsz, half=half)
    if picked is None:
        raise InvalidJob(
            f"no usable {export_format} variant of the model fits imgsz {imgsz} on {lane.lane}",
            code=ErrorCode.FORMAT_NOT_AVAILABLE,
        )
    return picked


def reproduction_tolerance(*, half: bool, int8: bool) -> float:
    """`REPRODUCTION_TOLERANCES` for a variant of this precision."""
    return REPRODUCTION_TOLERANCES["int8" if int8 else "half" if half else "fp32"]


def _fastest_first(variants: Iterable[Variant]) -> list[Variant]:
    """Dynamic before static, then static by batch, smallest first; stable otherwise.

    A dynamic variant letterboxes each image to its minimal rectangle, as the `.pt` does, where a
    static one pads it to the square it was built for, and takes every same-shape group of a
    job's images in one call, where a batch-1 variant takes them one call per image: 2.5x
    direct `.pt` predict against 1.8x for static batch 1 (OpenVINO, 32 images at imgsz 320, 2
    CPU cores; BENCHMARKS.md, bench.inference_formats). A static batch-N variant pads every
    call to N images, so a smaller batch wastes less on short groups.
    """
    return sorted(
        variants, key=lambda variant: (not variant.lineage.dynamic, variant.lineage.batch)
    )


def available_formats(
    variants: Sequence[Variant], *, imgsz: int, half: bool, cuda: bool
) -> list[str]:
    """The formats a job of this `imgsz` and `half` can name on a host with CUDA lanes or
    without: `pt` always, and each format the model has a fitting variant of."""
    fitting = (v for v in variants if variant_fits(v, imgsz=imgsz, half=half, cuda=cuda))
    return ["pt", *sorted({str(v.format) for v in fitting})]


def _engine_fits(variant: Variant, lane: LaneRuntime) -> bool:
    built = variant.lineage
    return (
        variant.format is ExportFormat.ENGINE
        and built.gpu_name == lane.gpu_name
        and built.compute_capability == lane.compute_capability
        and built.tensorrt_version == lane.tensorrt_version
        and built.ultralytics_version == lane.ultralytics_version
    )


def export_refusal(export_format: ExportFormat, *, half: bool, lanes: Sequence[str]) -> str | None:
    """Why this host cannot build `export_format` with these options, or None if it can."""
    has_cuda = any(lane.startswith("cuda:") for lane in lanes)
    shown = ", ".join(lanes) or "none"
    if export_format is ExportFormat.ENGINE and not has_cuda:
        return (
            "a TensorRT engine is built on the CUDA lane that will run it, and this host has no "
            f"CUDA lane (lanes: {shown})"
        )
    if half and export_format is ExportFormat.TORCHSCRIPT and not has_cuda:
        return f"FP16 TorchScript can only be exported on a CUDA lane (lanes: {shown})"
    return None
