"""The export runner on its own, on the CPU: cancel between stages, and missing packages fail the
job by name without any install attempt."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.yolo_export import Registry, export_context
from yolo_orch.errors import ExportDependencyMissing, JobCancelled
from yolo_orch.registry.weights import ResolvedWeights, sha256_file
from yolo_orch.runners.export import YoloExportRunner
from yolo_orch.testing.yolo import RecordingContext, build_checkpoint, ensure_ultralytics


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> ResolvedWeights:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    path = build_checkpoint(tmp_path_factory.mktemp("weights") / "tiny.pt")
    return ResolvedWeights(path, sha256_file(path))


class CancelAfter(RecordingContext):
    """Asks for cancel once the runner has begun `stage`."""

    def __init__(self, stage: str) -> None:
        super().__init__()
        self.stage = stage

    def should_cancel(self) -> bool:
        return any(p.detail.get("stage") == self.stage for p in self.progress if p.detail)


def test_an_export_registers_its_files_with_their_manifest_and_lineage(
    weights: ResolvedWeights, tmp_path: Path
) -> None:
    registry = Registry(weights)
    runner = YoloExportRunner(registry.resolve, registry.register, data_roots=[])
    recorder = RecordingContext()

    result = runner.run(export_context(recorder, tmp_path / "job", format="onnx"))

    assert result.summary == {"model_id": "tiny-id", "variant_id": "variant-1", "format": "onnx"}
    [files] = registry.registered
    assert list(files.manifest.files) == ["model.onnx"]
    assert (files.lineage.source_sha256, files.lineage.imgsz) == (weights.sha256, 64)
    assert (files.job_id, files.source) == ("job-1", "export:job-1")
    stages = [p.detail.get("stage") for p in recorder.progress if p.detail]
    assert stages == ["load", "export", "check", "fingerprint", "register", None]
    assert not (tmp_path / "job" / "export").exists()  # the registry has its own copy


def test_cancel_during_an_export_stops_at_the_next_stage_and_registers_nothing(
    weights: ResolvedWeights, tmp_path: Path
) -> None:
    registry = Registry(weights)
    runner = YoloExportRunner(registry.resolve, registry.register, data_roots=[])
    recorder = CancelAfter("export")

    with pytest.raises(JobCancelled):
        runner.run(export_context(recorder, tmp_path / "job", format="onnx"))

    assert registry.registered == []
    assert recorder.progress[-1].detail["stage"] == "export"


@pytest.mark.parametrize(
    ("params", "hidden", "missing"),
    [
        ({"format": "openvino"}, ["openvino"], "openvino"),
        ({"format": "onnx"}, ["onnxslim"], "onnxslim"),
        ({"format": "onnx", "simplify": False}, ["onnx", "onnxslim"], "onnx"),
    ],
)
def test_a_missing_package_fails_by_name_and_is_never_installed(
    weights: ResolvedWeights,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    params: dict[str, Any],
    hidden: list[str],
    missing: str,
) -> None:
    for module in hidden:
        monkeypatch.setitem(sys.modules, module, None)  # import fails: as if not installed
    started: list[Any] = []

    def no_processes(*args: Any, **kwargs: Any) -> Any:
        started.append(args)
        raise AssertionError("an install was attempted")

    monkeypatch.setattr(subprocess, "Popen", no_processes)
    registry = Registry(weights)
    runner = YoloExportRunner(registry.resolve, registry.register, data_roots=[])

    with pytest.raises(ExportDependencyMissing) as raised:
        runner.run(export_context(RecordingContext(), tmp_path / "job", **params))

    assert raised.value.code == "export_dependency_missing"
    assert raised.value.package == missing
    assert missing in raised.value.message
    assert started == []
    assert registry.resolved == []  # failed before the model was even looked up
    assert registry.registered == []


def test_ultralytics_itself_would_not_install_either(weights: ResolvedWeights) -> None:
    import ultralytics.utils

    assert ultralytics.utils.AUTOINSTALL is False


def test_loading_a_variant_whose_runtime_is_missing_names_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import UTC, datetime

    from yolo_orch.domain.variants import ExportFormat, Lineage, Variant
    from yolo_orch.registry.resolutions import ResolvedVariant
    from yolo_orch.runners.formats import load_variant

    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    lineage = Lineage("a" * 64, 64, False, False, False, 1, "cpu")
    variant = Variant(
        "v", "m", ExportFormat.ONNX, "b" * 64, 1, {}, lineage, "upload", None, datetime.now(UTC)
    )

    with pytest.raises(ExportDependencyMissing) as raised:
        load_variant(ResolvedVariant(variant, tmp_path), "detect")

    assert raised.value.package == "onnxruntime"
