"""Does an exported variant reproduce its model? Both run on a fixed probe and their raw head
outputs are compared.

An exported file carries its model's metadata (task, class names, size), which anyone can copy:
a one-node ONNX graph with a real export's metadata, or an export of other weights, passes every
check of what the file says. So the variant and its model's `.pt` run on `PROBE_IMAGES`
generated images at the variant's imgsz (seeded noise and filled rectangles: the same pixels
every time), and their outputs before NMS are compared: the tensors the exported graph ends in,
which the `.pt` gives when its head is set up as ultralytics' exporter sets it up
(`_as_exported`). Raw outputs, not detections: an untrained model detects nothing, but its raw
outputs still tell its weights apart.

The difference is the largest, over outputs and channels, of the RMS difference relative to the
`.pt`'s RMS in that channel (`relative_difference`): it reads the same for boxes in pixels,
scores, mask coefficients and keypoints. Within `variants.reproduction_tolerance` (fp32, half,
int8) the variant is the model; beyond, `variant_mismatch`. OpenVINO runs here in f32 whatever
the CPU prefers, so the measure is of the variant's weights, not of the CPU's 16-bit type.

Call `configure_ultralytics` first (the import path does: `check_imported`).
"""

from __future__ import annotations

from collections.abc import Sequence
from copy import deepcopy
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yolo_orch.domain.variants import ExportFormat, reproduction_tolerance
from yolo_orch.errors import ErrorCode, InvalidJob, ModelTampered, YoloOrchError
from yolo_orch.files.shown_paths import ShownPaths
from yolo_orch.registry.variant_store import CheckImport
from yolo_orch.registry.weights import ResolvedWeights, sha256_file
from yolo_orch.runners.formats import compile_openvino_backend

if TYPE_CHECKING:
    import numpy as np
    import torch
    from numpy.typing import NDArray

    from yolo_orch.registry.variant_imports import ExportedMetadata

__all__ = ["PROBE_IMAGES", "check_imported", "check_reproduces", "probe", "relative_difference"]

PROBE_IMAGES = 2
PROBE_SEED = 20261201
_MAX_DETECTIONS = 300
"""What ultralytics' exporter bakes into a head that selects its outputs (`max_det`)."""
_FLOOR = 1e-2
"""A channel whose RMS is below this share of the output's RMS is compared against that share:
a class the head scores near zero everywhere would otherwise divide by almost nothing."""


def check_imported(
    weights: ResolvedWeights,
    entry: Path,
    export_format: ExportFormat,
    meta: ExportedMetadata,
    config_dir: Path,
) -> None:
    """`check_reproduces` for a file a client brought, on the CPU, against the registry's
    `.pt` (checked against its fingerprint first). Blocking."""
    from yolo_orch.runners.yolo_env import configure_ultralytics

    configure_ultralytics(config_dir)
    from ultralytics.models import YOLO

    actual = sha256_file(weights.path)
    if actual != weights.sha256:
        raise ModelTampered(weights.path, weights.sha256, actual)
    model: Any = YOLO(str(weights.path))
    check_reproduces(
        model.model,
        entry,
        export_format,
        imgsz=meta.imgsz,
        dynamic=meta.dynamic,
        half=meta.half,
        int8=meta.int8,
        device="cpu",
    )


def check_reproduces(
    net: Any,
    entry: Path,
    export_format: ExportFormat,
    *,
    imgsz: int,
    dynamic: bool,
    half: bool,
    int8: bool,
    device: str,
) -> float:
    """Run the variant at `entry` and the model `net` (the `.pt`'s network) on the probe on
    `device`; return their `relative_difference`, or raise `InvalidJob` (`variant_mismatch`)
    saying by how much they differ, or how their outputs' shapes do."""
    import torch

    images = probe(imgsz).to(device)
    with torch.inference_mode():
        backend, got = _run_variant(entry, export_format, device, images)
        exported = _as_exported(net, export_format, dynamic, backend, imgsz).to(device)
        want = _tensors(exported(images))
    selects = _selects_rows(exported)
    tolerance = reproduction_tolerance(half=half, int8=int8)
    precision = "int8" if int8 else "half" if half else "fp32"
    where = f"on {PROBE_IMAGES} probe images at imgsz {imgsz}"
    if len(got) != len(want):
        raise _mismatch(f"it has {len(got)} output(s), the .pt {len(want)} ({where})")
    worst, at = 0.0, ""
    for index, (expected, actual) in enumerate(zip(want, got, strict=True)):
        if expected.shape != actual.shape:
            raise _mismatch(
                f"its output {index} has the shape {tuple(actual.shape)}, the .pt's "
                f"{tuple(expected.shape)} ({where})"
            )
        difference, channel = relative_difference(expected, actual, selects=selects)
        if difference > worst or not at:
            worst, at = difference, f"output {index}, channel {channel}"
    if not worst <= tolerance:  # NaN too
        raise _mismatch(
            f"its raw outputs differ from the .pt's by {worst:.3g} ({at}; the largest RMS "
            f"difference in a channel relative to the .pt's RMS there) {where}; at most "
            f"{tolerance:g} for {precision} {export_format} variants"
        )
    return worst


def probe(imgsz: int, count: int = PROBE_IMAGES) -> torch.Tensor:
    """`count` RGB images (N, 3, imgsz, imgsz), float32 in [0, 1] as ultralytics feeds a model:
    seeded noise with filled rectangles, the same every time."""
    import numpy as np
    import torch

    rng = np.random.default_rng(PROBE_SEED)
    images = rng.integers(0, 256, size=(count, 3, imgsz, imgsz), dtype=np.uint8)
    for image in images:
        for _ in range(3):
            x1, y1 = (int(v) for v in rng.integers(0, imgsz // 2, size=2))
            width, height = (int(v) for v in rng.integers(imgsz // 8 + 1, imgsz // 2, size=2))
            colour = rng.integers(0, 256, size=(3, 1, 1), dtype=np.uint8)
            image[:, y1 : y1 + height, x1 : x1 + width] = colour
    return torch.from_numpy(images).float() / 255


def relative_difference(
    want: NDArray[Any], got: NDArray[Any], *, selects: bool = False
) -> tuple[float, int]:
    """The largest RMS difference of a channel (axis 1; the last axis of a head's selected rows),
    relative to `want`'s RMS in it (at least `_FLOOR` of the whole output's), and that channel.
    `selects`: a head that selects its top rows (RT-DETR, NMS-free heads) may order near-equal
    rows differently; each column is compared sorted. Non-finite values where `want` has finite
    ones differ infinitely."""
    import numpy as np

    axis = 1
    if selects and want.ndim == 3:
        want, got, axis = np.sort(want, axis=1), np.sort(got, axis=1), 2
    if want.ndim < 2:
        want, got, axis = want.reshape(1, -1), got.reshape(1, -1), 0
    reference = _channels(want, axis)
    candidate = _channels(got, axis)
    finite = np.isfinite(reference)
    if not np.array_equal(finite, np.isfinite(candidate)):
        return float("inf"), 0
    reference, candidate = np.where(finite, reference, 0), np.where(finite, candidate, 0)
    scale = np.sqrt((reference**2).mean(axis=1))
    floor = max(_FLOOR * float(np.sqrt((reference**2).mean())), np.finfo(np.float64).tiny)
    differences = np.sqrt(((candidate - reference) ** 2).mean(axis=1)) / np.maximum(scale, floor)
    channel = int(np.argmax(differences))
    return float(differences[channel]), channel


def _channels(values: NDArray[Any], axis: int) -> NDArray[np.float64]:
    import numpy as np

    moved = np.moveaxis(values.astype(np.float64), axis, 0)
    return moved.reshape(moved.shape[0], -1)


def _run_variant(
    entry: Path, export_format: ExportFormat, device: str, images: torch.Tensor
) -> tuple[Any, list[NDArray[Any]]]:
    """The variant loaded as ultralytics runs it (its own backend; OpenVINO compiled for f32)
    and its outputs on `images`. A variant ultralytics cannot load or run is `invalid_variant`:
    every job given it would fail."""
    import torch
    from ultralytics.nn.autobackend import AutoBackend

    try:
        backend = AutoBackend(str(entry), device=torch.device(device), verbose=False)
        if export_format is ExportFormat.OPENVINO:
            compile_openvino_backend(backend.backend, entry, torch.get_num_threads(), half=False)
        return backend, _tensors(backend(images))
    except YoloOrchError:  # a runtime this host lacks: export_dependency_missing
        raise
    except Exception as e:  # a file from outside: every way it fails to run is a bad file
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        said = ShownPaths([entry.parent]).text(lines[-1]) if lines else ""
        raise InvalidJob(
            f"the file is not a usable exported model: ultralytics cannot run it on the probe "
            f"({type(e).__name__}: {said[:200]})",
            code=ErrorCode.INVALID_VARIANT,
        ) from None


def _as_exported(
    net: Any, export_format: ExportFormat, dynamic: bool, backend: Any, imgsz: int
) -> Any:
    """A copy of `net` set up as ultralytics' exporter sets it up before it traces it (the head
    in export mode, for this format, dynamic or not, NMS-free where the variant is), so that it
    returns what the exported graph returns."""
    from ultralytics.nn.modules import Classify, Depth, Detect, RTDETRDecoder, SemanticSegment

    exported: Any = deepcopy(net).float().eval()
    if hasattr(exported, "end2end"):
        exported.end2end = bool(getattr(backend, "metadata", {}).get("end2end", False))
    exported = exported.fuse(verbose=False)
    for module in exported.modules():
        if isinstance(module, Classify | SemanticSegment | Depth):
            _set(module, export=True, format=str(export_format))
        if isinstance(module, Detect | RTDETRDecoder):
            anchors = (
                module.num_queries
                if isinstance(module, RTDETRDecoder)
                else sum((imgsz // int(stride)) ** 2 for stride in exported.stride.tolist())
            )
            _set(
                module,
                dynamic=dynamic,
                export=True,
                format=str(export_format),
                max_det=min(_MAX_DETECTIONS, anchors),
                agnostic_nms=False,
                xyxy=False,
                shape=None,
            )
    return exported


def _set(module: Any, **attributes: Any) -> None:
    for name, value in attributes.items():
        setattr(module, name, value)


def _selects_rows(net: Any) -> bool:
    from ultralytics.nn.modules import RTDETRDecoder

    return bool(getattr(net, "end2end", False)) or isinstance(net.model[-1], RTDETRDecoder)


def _tensors(outputs: Any) -> list[NDArray[Any]]:
    """Every tensor of a model's outputs, in order (nested lists and tuples flattened)."""
    if isinstance(outputs, Sequence) and not isinstance(outputs, str):
        return [tensor for output in outputs for tensor in _tensors(output)]
    if outputs is None or isinstance(outputs, dict):  # a head's training-time extras
        return []
    return [outputs.detach().float().cpu().numpy()]


def _mismatch(reason: str) -> InvalidJob:
    return InvalidJob(
        f"the variant does not reproduce its model: {reason}", code=ErrorCode.VARIANT_MISMATCH
    )


def check_on_cpu(config_dir: Path) -> CheckImport:
    """The import check (`runners.variant_check.check_imported`), with ultralytics configured
    in `config_dir` if nothing did it before; torch loads with the first import checked."""

    def check(
        weights: ResolvedWeights, entry: Path, export_format: ExportFormat, meta: ExportedMetadata
    ) -> None:
        check_imported(weights, entry, export_format, meta, config_dir)

    return check
