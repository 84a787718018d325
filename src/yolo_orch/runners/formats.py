"""What each exported format needs on this host, and loading a verified variant.

ultralytics pip-installs a missing package when it exports or loads (`check_requirements`).
`configure_ultralytics` switches that off (`YOLO_AUTOINSTALL=false`); on top, every package is
checked here first, so a missing one fails with `export_dependency_missing`, naming it, before
ultralytics is asked for anything. The packages come from the project's extras: `yolo` carries
the CPU formats' (onnx, onnxslim, onnxruntime, openvino), `tensorrt` the engine's.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yolo_orch.domain.variants import ExportFormat, LaneRuntime
from yolo_orch.errors import ExportDependencyMissing, ModelTampered, VariantTampered
from yolo_orch.params.export import ExportParams
from yolo_orch.registry.manifests import verify_tree
from yolo_orch.registry.resolutions import ResolvedVariant

if TYPE_CHECKING:
    from ultralytics.models import YOLO

__all__ = [
    "compile_openvino_backend",
    "compile_openvino_for_lane",
    "export_packages",
    "installed_version",
    "lane_runtime",
    "load_variant",
    "require_packages",
    "runnable_formats",
]

log = logging.getLogger(__name__)

RUNTIME_PACKAGES: dict[ExportFormat, tuple[str, ...]] = {
    ExportFormat.ONNX: ("onnxruntime",),
    ExportFormat.OPENVINO: ("openvino",),
    ExportFormat.TORCHSCRIPT: (),  # torch itself
    ExportFormat.ENGINE: ("tensorrt",),
}
"""What loading a variant of each format needs."""


def export_packages(params: ExportParams) -> list[str]:
    """What exporting with `params` needs, as ultralytics' exporter would ask for it."""
    onnx_graph = ["onnx"]
    if params.simplify is not False:
        onnx_graph += ["onnxslim", "onnxruntime"]  # ultralytics checks both when it simplifies
    needs = {
        ExportFormat.ONNX: onnx_graph + (["onnxruntime"] if params.half else []),
        ExportFormat.OPENVINO: ["openvino"] + (["nncf"] if params.int8 else []),
        ExportFormat.TORCHSCRIPT: [],
        ExportFormat.ENGINE: [*onnx_graph, "tensorrt"],
    }[params.format]
    return list(dict.fromkeys(needs))


def require_packages(packages: Iterable[str], purpose: str) -> None:
    """Raise `ExportDependencyMissing` for the first package that cannot be imported."""
    for package in packages:
        if importlib.util.find_spec(package) is None:
            raise ExportDependencyMissing(package, purpose)


def installed_version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def runnable_formats() -> frozenset[ExportFormat]:
    """Formats whose runtime packages this host has."""
    return frozenset(
        export_format
        for export_format, packages in RUNTIME_PACKAGES.items()
        if all(importlib.util.find_spec(package) is not None for package in packages)
    )


def lane_runtime(lane: str) -> LaneRuntime:
    """What `lane` is and runs: the device and software a variant must have been built for."""
    import torch
    import ultralytics

    gpu_name = capability = None
    prefix, _, index = lane.partition(":")
    if prefix == "cuda" and index.isdigit():
        gpu_name = torch.cuda.get_device_name(int(index))
        major, minor = torch.cuda.get_device_capability(int(index))
        capability = f"{major}.{minor}"
    return LaneRuntime(
        lane=lane,
        runnable=runnable_formats(),
        gpu_name=gpu_name,
        compute_capability=capability,
        tensorrt_version=installed_version("tensorrt") if gpu_name else None,
        ultralytics_version=ultralytics.__version__,
    )


def load_variant(resolved: ResolvedVariant, task: str) -> YOLO:
    """Check every file of the variant against its manifest, then load it with ultralytics.

    Raises `VariantTampered` (a `ModelTampered`) when a file changed, appeared or went missing,
    and `ExportDependencyMissing` when the format's runtime is not installed.
    """
    variant = resolved.variant
    require_packages(RUNTIME_PACKAGES[variant.format], f"running a {variant.format} model")
    try:
        verify_tree(resolved.folder, variant.files, variant.sha256)
    except ModelTampered as e:
        raise VariantTampered(variant.id, e) from None
    from ultralytics.models import YOLO

    return YOLO(str(resolved.entry), task=task)


def compile_openvino_for_lane(model: YOLO, folder: Path, threads: int, half: bool) -> None:
    """Compile a loaded OpenVINO model (its predictor set up) again, to run on `threads` CPU
    threads, as torch does on the lane (`inference.default_cpu_threads`), and in the precision
    the variant was exported for.

    Threads: ultralytics compiles with OpenVINO's LATENCY hint, which takes every core; on 2
    shared cores that left the event loop without one, and batch-1 calls ran slower than on one
    thread (raw OpenVINO, imgsz 320: 95 img/s on 2 threads, 145 on 1).

    Precision: OpenVINO's CPU plugin runs even an FP32 model in bfloat16 on CPUs with AMX or
    AVX-512 BF16, which moved boxes by tens of pixels on an input-sensitive network. A full
    precision variant therefore runs in f32 (half the speed of bfloat16 on such CPUs; the same
    elsewhere); a half variant keeps the CPU's default, its fastest 16-bit type where it has one.

    Later per-shape recompiles (ultralytics does them for INT8 dynamic models on AMX CPUs) keep
    these settings. If ultralytics' backend no longer has the attributes this relies on, the
    model runs as ultralytics set it, and a warning says so.
    """
    backend = getattr(getattr(model.predictor, "model", None), "backend", None)
    compile_openvino_backend(backend, folder, threads, half)


def compile_openvino_backend(backend: Any, folder: Path, threads: int, half: bool) -> None:
    """`compile_openvino_for_lane` on ultralytics' OpenVINO backend itself (an `AutoBackend`'s
    `backend`), as the variant check runs it."""
    compile_model = getattr(backend, "compile_model", None)
    config = getattr(compile_model, "keywords", {}).get("config")
    if backend is None or not (
        isinstance(compile_model, functools.partial) and isinstance(config, dict)
    ):
        log.warning("cannot set OpenVINO's threads and precision: its ultralytics backend changed")
        return
    import openvino

    settings: dict[str, object] = {**config, "INFERENCE_NUM_THREADS": threads}
    if not half:
        settings["INFERENCE_PRECISION_HINT"] = "f32"
    for_lane = functools.partial(compile_model, config=settings)
    xml = next(folder.glob("*.xml"))
    backend.compile_model = for_lane
    backend.ov_compiled_model = for_lane(openvino.Core().read_model(xml))
