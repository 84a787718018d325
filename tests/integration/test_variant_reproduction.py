"""A variant must reproduce its model: an imported file and an export job's output run beside the
model's `.pt` on the probe, and one whose raw outputs are not the `.pt`'s (a one-node graph
carrying a real export's metadata, an export of other weights of the same architecture) is
refused `variant_mismatch`, with the difference measured, and nothing is stored.

The models are untrained yolo11n with lively weights (`build_task_checkpoint(lively=True)`):
torch's default init gives every seed the same raw outputs."""

from __future__ import annotations

import shutil
import warnings
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import serve
from tests.support.problems import assert_problem
from tests.support.yolo_export import Registry, export_context
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.domain.variants import REPRODUCTION_TOLERANCES
from yolo_orch.errors import InvalidJob
from yolo_orch.registry.weights import ResolvedWeights, sha256_file
from yolo_orch.runners import export as export_runner
from yolo_orch.runners.export import YoloExportRunner
from yolo_orch.testing.yolo import RecordingContext, build_task_checkpoint, ensure_ultralytics

IMGSZ = 64


@dataclass(frozen=True)
class Files:
    tiny: Path
    other: Path
    """The same architecture and class names as `tiny`, other weights (another seed)."""
    tiny_onnx: Path
    other_onnx: Path


def _exported(weights: Path, folder: Path) -> Path:
    """An ONNX export of `weights`, made in its own folder (the exporter writes beside it)."""
    from ultralytics.models import YOLO

    folder.mkdir(parents=True)
    copy = shutil.copy(weights, folder / "model.pt")
    with warnings.catch_warnings():  # torch's deprecations and tracer warnings, as the server's
        warnings.simplefilter("ignore")  # exports keep them (`logs.warnings_to_job_logs`)
        return Path(YOLO(str(copy)).export(format="onnx", imgsz=IMGSZ, simplify=False))


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Files:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    base = tmp_path_factory.mktemp("reproduction")
    tiny = build_task_checkpoint(base / "weights" / "tiny.pt", "detect", lively=True)
    other = build_task_checkpoint(base / "weights" / "other.pt", "detect", seed=1, lively=True)
    return Files(
        tiny, other, _exported(tiny, base / "tiny-onnx"), _exported(other, base / "other-onnx")
    )


@pytest.fixture
async def api(
    files: Files, settings_factory: Callable[..., Settings]
) -> AsyncIterator[httpx.AsyncClient]:
    settings = settings_factory(runtime="auto", database_url="", model_roots=[files.tiny.parent])
    async with serve(create_app(settings)) as client:
        for name in ("tiny", "other"):
            imported = await client.post("/v1/models", json={"path": f"{name}.pt"})
            assert imported.status_code == 201, imported.text
        yield client


async def upload(api: httpx.AsyncClient, model: str, onnx: bytes) -> httpx.Response:
    return await api.post(f"/v1/models/{model}/variants", files={"file": ("m.onnx", onnx)})


async def test_a_genuine_export_is_accepted_and_records_the_pt_it_reproduces(
    api: httpx.AsyncClient, files: Files
) -> None:
    accepted = await upload(api, "tiny", files.tiny_onnx.read_bytes())

    assert accepted.status_code == 201, accepted.text
    assert accepted.json()["lineage"]["source_sha256"] == sha256_file(files.tiny)


def identity_graph(metadata_from: Path, *, out_of_range: bool = False) -> bytes:
    """One Identity node (images in, images out) carrying a real export's metadata; or, with
    `out_of_range`, one Gather of a channel the images do not have (it loads, and fails when
    it runs)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    shape = [1, 3, IMGSZ, IMGSZ]
    node = helper.make_node("Identity", ["images"], ["output0"])
    constants = []
    if out_of_range:
        node = helper.make_node("Gather", ["images", "channel"], ["output0"], axis=1)
        constants = [numpy_helper.from_array(np.array([7], np.int64), "channel")]
    graph = helper.make_graph(
        [node],
        "copied",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, None)],
        constants,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    real = onnx.load(str(metadata_from))
    helper.set_model_props(model, {prop.key: prop.value for prop in real.metadata_props})
    data: bytes = model.SerializeToString()
    return data


async def test_a_one_node_graph_with_a_real_exports_metadata_is_refused(
    api: httpx.AsyncClient, files: Files
) -> None:
    forged = identity_graph(files.tiny_onnx)
    assert len(forged) < 2048  # the adversarial run's was 630 bytes

    refused = await upload(api, "tiny", forged)

    detail = assert_problem(refused, 422, "variant_mismatch")["detail"]
    assert f"has the shape (2, 3, {IMGSZ}, {IMGSZ}), the .pt's (2, 7, 84)" in detail
    assert (await api.get("/v1/models/tiny")).json()["variants"] == []


async def test_a_graph_that_fails_when_it_runs_is_refused_as_no_usable_model(
    api: httpx.AsyncClient, files: Files
) -> None:
    refused = await upload(api, "tiny", identity_graph(files.tiny_onnx, out_of_range=True))

    detail = assert_problem(refused, 422, "invalid_variant")["detail"]
    assert "ultralytics cannot run it on the probe" in detail
    assert (await api.get("/v1/models/tiny")).json()["variants"] == []


async def test_an_export_of_other_weights_is_refused_and_is_a_variant_of_its_own_model(
    api: httpx.AsyncClient, files: Files
) -> None:
    exported = files.other_onnx.read_bytes()

    refused = await upload(api, "tiny", exported)
    its_own = await upload(api, "other", exported)

    detail = assert_problem(refused, 422, "variant_mismatch")["detail"]
    assert "its raw outputs differ from the .pt's by" in detail
    assert f"at most {REPRODUCTION_TOLERANCES['fp32']:g} for fp32 onnx variants" in detail
    assert (await api.get("/v1/models/tiny")).json()["variants"] == []
    assert its_own.status_code == 201, its_own.text


def test_an_export_job_whose_output_does_not_reproduce_the_pt_fails_and_registers_nothing(
    files: Files, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def exports_other_weights(model: Any, args: dict[str, Any]) -> str:
        """The exporter, writing an export of other weights where the job's would go."""
        target = Path(model.model.pt_path).with_suffix(".onnx")
        shutil.copy(files.other_onnx, target)
        return str(target)

    monkeypatch.setattr(export_runner, "_exporting", exports_other_weights)
    registry = Registry(ResolvedWeights(files.tiny, sha256_file(files.tiny)))
    runner = YoloExportRunner(registry.resolve, registry.register, data_roots=[])
    recorder = RecordingContext()

    with pytest.raises(InvalidJob) as failed:
        runner.run(export_context(recorder, tmp_path / "job", format="onnx"))

    assert failed.value.code == "variant_mismatch"
    assert registry.registered == []
    assert [p.detail.get("stage") for p in recorder.progress if p.detail][-1] == "check"
