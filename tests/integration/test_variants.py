"""Which variant `format: auto` runs on a lane, what a host can build, and folder manifests."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.variants import variant
from yolo_orch.domain.variants import (
    ExportFormat,
    LaneRuntime,
    available_formats,
    choose_variant,
    export_refusal,
    named_variant,
)
from yolo_orch.errors import ModelTampered
from yolo_orch.registry.manifests import (
    copy_tree_hashing,
    fingerprint_entry,
    fingerprint_tree,
    verify_tree,
)

H200 = {"gpu_name": "NVIDIA H200", "compute_capability": "9.0", "tensorrt_version": "10.9.0"}
CPU = LaneRuntime("cpu", frozenset(ExportFormat), ultralytics_version="8.4.190")
CUDA = LaneRuntime("cuda:0", frozenset(ExportFormat), ultralytics_version="8.4.190", **H200)


ONNX, OPENVINO = variant(ExportFormat.ONNX), variant(ExportFormat.OPENVINO)
TORCHSCRIPT = variant(ExportFormat.TORCHSCRIPT)
ENGINE = variant(ExportFormat.ENGINE, half=True, device="cuda:0", **H200)


def test_a_cpu_lane_prefers_openvino_then_onnx_and_never_torchscript_or_engines() -> None:
    assert choose_variant([ONNX, TORCHSCRIPT, OPENVINO, ENGINE], CPU, imgsz=320, half=False) == (
        OPENVINO
    )
    assert choose_variant([TORCHSCRIPT, ONNX], CPU, imgsz=320, half=False) == ONNX
    assert choose_variant([TORCHSCRIPT, ENGINE], CPU, imgsz=320, half=False) is None
    assert choose_variant([], CPU, imgsz=320, half=False) is None


def test_a_cpu_lane_runs_only_formats_whose_runtime_is_installed() -> None:
    no_openvino = replace(CPU, runnable=frozenset({ExportFormat.ONNX}))

    assert choose_variant([OPENVINO, ONNX], no_openvino, imgsz=320, half=False) == ONNX
    assert choose_variant(
        [OPENVINO], replace(CPU, runnable=frozenset()), imgsz=320, half=False
    ) is (None)


def test_a_static_variant_runs_only_its_imgsz_and_a_dynamic_one_any() -> None:
    dynamic_onnx = variant(ExportFormat.ONNX, dynamic=True, imgsz=640)

    assert choose_variant([OPENVINO, dynamic_onnx], CPU, imgsz=640, half=False) == dynamic_onnx
    assert choose_variant([OPENVINO], CPU, imgsz=640, half=False) is None


def test_half_applies_on_cuda_and_to_openvino_on_the_cpu_and_must_match() -> None:
    fp16_openvino = variant(ExportFormat.OPENVINO, half=True)

    # On the CPU a half job runs a half OpenVINO variant; for other formats half is ignored
    # (as for .pt jobs), and a full-precision job never runs a half variant.
    assert choose_variant([fp16_openvino, ONNX], CPU, imgsz=320, half=True) == fp16_openvino
    assert choose_variant([OPENVINO, ONNX], CPU, imgsz=320, half=True) == ONNX
    assert choose_variant([fp16_openvino, ONNX], CPU, imgsz=320, half=False) == ONNX
    assert named_variant([fp16_openvino], ExportFormat.OPENVINO, CPU, imgsz=320, half=False) is None
    assert choose_variant([ENGINE], CUDA, imgsz=320, half=True) == ENGINE
    assert choose_variant([ENGINE], CUDA, imgsz=320, half=False) is None


def test_a_cuda_lane_runs_an_engine_built_for_its_gpu_and_software_else_the_pt() -> None:
    for other in (
        {"gpu_name": "NVIDIA A100-SXM4-80GB"},
        {"compute_capability": "8.0"},
        {"tensorrt_version": "10.8.0"},
        {"ultralytics_version": "8.4.100"},
    ):
        stale = variant(ExportFormat.ENGINE, "stale", half=True, **{**H200, **other})
        assert choose_variant([stale], CUDA, imgsz=320, half=True) is None
    assert choose_variant([OPENVINO, ONNX], CUDA, imgsz=320, half=False) is None


def test_unusable_and_int8_variants_are_never_picked_and_the_newest_wins() -> None:
    newest, older = variant(ExportFormat.OPENVINO, "new"), variant(ExportFormat.OPENVINO, "old")
    retired = replace(newest, usable=False)
    int8 = variant(ExportFormat.OPENVINO, "int8", int8=True)

    assert choose_variant([newest, older], CPU, imgsz=320, half=False) == newest
    assert choose_variant([int8, retired, older], CPU, imgsz=320, half=False) == older


def test_within_a_format_dynamic_runs_before_static_and_small_batches_before_large() -> None:
    static = variant(ExportFormat.OPENVINO, "static")
    batch8 = variant(ExportFormat.OPENVINO, "batch8", batch=8)
    dynamic = variant(ExportFormat.OPENVINO, "dynamic", dynamic=True, imgsz=640, batch=8)
    dynamic_onnx = variant(ExportFormat.ONNX, "dynamic-onnx", dynamic=True)

    for registered in ([static, batch8, dynamic], [batch8, dynamic, static]):
        assert choose_variant(registered, CPU, imgsz=320, half=False) == dynamic
        assert (
            named_variant(registered, ExportFormat.OPENVINO, CPU, imgsz=320, half=False) == dynamic
        )
    assert choose_variant([batch8, static], CPU, imgsz=320, half=False) == static
    assert choose_variant([batch8], CPU, imgsz=320, half=False) == batch8
    # the format order comes first: a static OpenVINO variant before a dynamic ONNX one
    assert choose_variant([dynamic_onnx, static], CPU, imgsz=320, half=False) == static
    int8_dynamic = variant(ExportFormat.OPENVINO, "int8", int8=True, dynamic=True)
    assert (
        named_variant([int8_dynamic, batch8], ExportFormat.OPENVINO, CPU, imgsz=320, half=False)
        == batch8
    )


def test_a_named_format_runs_its_newest_fitting_variant_full_precision_first() -> None:
    int8 = variant(ExportFormat.OPENVINO, "int8", int8=True)
    newest, older = variant(ExportFormat.OPENVINO, "new"), variant(ExportFormat.OPENVINO, "old")

    assert (
        named_variant([int8, newest, older], ExportFormat.OPENVINO, CPU, imgsz=320, half=False)
        == newest
    )
    assert named_variant([int8], ExportFormat.OPENVINO, CPU, imgsz=320, half=False) == int8
    assert named_variant([TORCHSCRIPT], ExportFormat.TORCHSCRIPT, CPU, imgsz=320, half=False)
    assert named_variant([ONNX], ExportFormat.ONNX, CPU, imgsz=640, half=False) is None
    assert named_variant([OPENVINO], ExportFormat.ONNX, CPU, imgsz=320, half=False) is None
    stale = variant(ExportFormat.ENGINE, half=True, **{**H200, "gpu_name": "NVIDIA A100"})
    assert named_variant([stale], ExportFormat.ENGINE, CUDA, imgsz=320, half=True) is None
    assert named_variant([ENGINE], ExportFormat.ENGINE, CUDA, imgsz=320, half=True) == ENGINE


def test_the_formats_a_job_can_name_are_pt_and_those_with_a_fitting_usable_variant() -> None:
    retired = replace(variant(ExportFormat.TORCHSCRIPT), usable=False)
    dynamic = variant(ExportFormat.OPENVINO, dynamic=True)

    assert available_formats([], imgsz=320, half=False, cuda=False) == ["pt"]
    assert available_formats([ONNX, retired, dynamic], imgsz=320, half=False, cuda=False) == [
        "pt",
        "onnx",
        "openvino",
    ]
    assert available_formats([ONNX, dynamic], imgsz=640, half=False, cuda=False) == [
        "pt",
        "openvino",
    ]
    assert available_formats([ONNX, ENGINE], imgsz=320, half=True, cuda=True) == ["pt", "engine"]


def test_what_a_host_cannot_build_says_why() -> None:
    engine_on_cpu = export_refusal(ExportFormat.ENGINE, half=False, lanes=["cpu"])
    assert engine_on_cpu is not None
    assert "CUDA lane" in engine_on_cpu
    assert export_refusal(ExportFormat.ENGINE, half=True, lanes=["cuda:0"]) is None
    assert export_refusal(ExportFormat.TORCHSCRIPT, half=True, lanes=["cpu"]) is not None
    assert export_refusal(ExportFormat.TORCHSCRIPT, half=True, lanes=["cuda:0"]) is None
    for cpu_format in (ExportFormat.ONNX, ExportFormat.OPENVINO):
        assert export_refusal(cpu_format, half=True, lanes=["cpu"]) is None


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "m_openvino_model"
    folder.mkdir()
    (folder / "m.xml").write_text("<net/>")
    (folder / "m.bin").write_bytes(b"\x00\x01" * 100)
    return folder


def test_a_copy_has_the_manifest_of_its_source_and_verifies(tmp_path: Path) -> None:
    source = _folder(tmp_path)
    copied = copy_tree_hashing(source, tmp_path / "copy", "model_openvino_model")

    assert sorted(copied.files) == ["model_openvino_model/m.bin", "model_openvino_model/m.xml"]
    assert copied.size_bytes == 206
    assert copied == fingerprint_tree(tmp_path / "copy")
    renamed = {k.replace("model_", "m_", 1): v for k, v in copied.files.items()}
    assert fingerprint_entry(source).files == renamed
    verify_tree(tmp_path / "copy", copied.files, copied.digest)


@pytest.mark.parametrize("change", ["edit", "add", "remove", "manifest"])
def test_any_change_to_a_folder_fails_verification(tmp_path: Path, change: str) -> None:
    manifest = copy_tree_hashing(_folder(tmp_path), tmp_path / "copy", "v")
    folder = tmp_path / "copy"
    files = dict(manifest.files)
    if change == "edit":
        (folder / "v" / "m.bin").write_bytes(b"\x00\x02" * 100)
    elif change == "add":
        (folder / "v" / "extra.bin").write_bytes(b"")
    elif change == "remove":
        (folder / "v" / "m.xml").unlink()
    else:
        files["v/m.xml"] = "0" * 64

    with pytest.raises(ModelTampered):
        verify_tree(folder, files, manifest.digest)


def test_links_are_refused(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (folder / "link.bin").symlink_to(folder / "m.bin")

    with pytest.raises(ValueError, match="not a regular file"):
        fingerprint_tree(folder)
