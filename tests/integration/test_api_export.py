"""Export jobs and variants with the real runtime, on the CPU: ONNX, OpenVINO and TorchScript
exports registered as variants and loaded back through the loader; tampering; the refusals; the
imports clients may make; deleting a model with variants."""

from __future__ import annotations

import asyncio
import io
import sys
import zipfile
from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx
import pytest

from tests.conftest import wait_terminal
from tests.support.export_host import IMGSZ, Host, host, host_settings
from tests.support.problems import assert_problem
from yolo_orch.errors import VariantTampered
from yolo_orch.runners.formats import load_variant
from yolo_orch.runners.yolo import MarksTamperedModels
from yolo_orch.testing.training import make_dataset
from yolo_orch.testing.yolo import (
    RecordingContext,
)

__all__ = ["host", "host_settings"]  # the fixtures, from tests/support/export_host.py


def _boxes(model: Any, image: Path) -> list[tuple[float, ...]]:
    [result] = model.predict(str(image), imgsz=IMGSZ, device="cpu", conf=0.25, verbose=False)
    rows = zip(result.boxes.xyxy.tolist(), result.boxes.conf.tolist(), strict=True)
    return sorted((*box, conf) for box, conf in rows)


async def test_onnx_openvino_and_torchscript_exports_become_variants_that_load_and_predict(
    host: Host,
) -> None:
    model = await host.import_tiny()
    image = host.data / "shots" / "img0.jpg"
    from ultralytics.models import YOLO

    reference = await anyio.to_thread.run_sync(
        _boxes, YOLO(str(host.registry.path_of(await host.registry.get("tiny")))), image
    )
    assert reference, "the biased head detects class 0 everywhere"

    for export_format in ("onnx", "openvino", "torchscript"):
        job = await host.export(format=export_format)

        assert job["state"] == "succeeded", job["error"]
        assert job["progress"] == {
            "done": 5,
            "total": 5,
            "unit": "stages",
            "detail": {"format": export_format},
        }
        assert job["result"]["format"] == export_format
        assert job["result"]["model_id"] == model["id"]
        variant_id = job["result"]["variant_id"]
        log = (await host.client.get(f"/v1/jobs/{job['id']}/logs")).text
        assert "export success" in log.lower() or "starting export" in log.lower(), log

        resolved = await host.resolved(variant_id)
        loaded = await anyio.to_thread.run_sync(load_variant, resolved, "detect")
        boxes = await anyio.to_thread.run_sync(_boxes, loaded, image)
        # fp32 formats: the same detections, boxes within 1 px and confidences within 1e-2.
        assert len(boxes) == len(reference)
        for got, want in zip(boxes, reference, strict=True):
            assert all(abs(a - b) <= 1.0 for a, b in zip(got[:4], want[:4], strict=True))
            assert abs(got[4] - want[4]) <= 1e-2

    variants = await host.variants()
    assert sorted(v["format"] for v in variants) == ["onnx", "openvino", "torchscript"]
    openvino = next(v for v in variants if v["format"] == "openvino")
    assert sorted(openvino["files"]) == [
        "model_openvino_model/metadata.yaml",
        "model_openvino_model/model.bin",
        "model_openvino_model/model.xml",
    ]
    assert openvino["lineage"]["source_sha256"] == model["sha256"]
    assert openvino["lineage"]["imgsz"] == IMGSZ
    assert openvino["lineage"]["device"] == "cpu"
    assert (openvino["lineage"]["half"], openvino["lineage"]["dynamic"]) == (False, False)
    assert openvino["source"].startswith("export:")


async def test_a_tampered_openvino_file_is_caught_at_load_and_retires_the_variant(
    host: Host,
) -> None:
    await host.import_tiny()
    job = await host.export(format="openvino")
    variant_id = job["result"]["variant_id"]
    resolved = await host.resolved(variant_id)
    weights = resolved.entry / "model.bin"
    weights.write_bytes(weights.read_bytes()[:-8] + b"tampered")

    class LoadsTheVariant:
        def run(self, ctx: Any) -> Any:
            return load_variant(resolved, "detect")

    marking = MarksTamperedModels(LoadsTheVariant(), host.registry)
    ctx = RecordingContext().context(host.data, [])
    with pytest.raises(VariantTampered) as raised:
        await anyio.to_thread.run_sync(marking.run, ctx)

    assert raised.value.code == "model_tampered"
    assert raised.value.variant_id == variant_id
    [variant] = await host.variants()
    assert variant["usable"] is False
    assert await host.registry.variants.resolve(variant["model_id"]) == []
    tiny = (await host.client.get("/v1/models/tiny")).json()
    assert tiny["usable"] is True  # the .pt it came from is fine


async def test_exports_the_host_cannot_build_or_does_not_know_are_refused(host: Host) -> None:
    await host.import_tiny()

    refusals = [
        ({"format": "engine"}, "export_unsupported"),
        ({"format": "torchscript", "half": True}, "export_unsupported"),
        ({"format": "tflite"}, "invalid_request"),
        ({"format": "onnx", "int8": True}, "invalid_request"),
        ({"format": "torchscript", "simplify": False}, "invalid_request"),
        ({"format": "onnx", "imgsz": 100}, "invalid_request"),
    ]
    for params, code in refusals:
        job = {"kind": "export", "model": "tiny", "params": params}
        response = await host.client.post("/v1/jobs", json=job)
        assert_problem(response, 422, code)

    assert (await host.client.get("/v1/jobs")).json()["jobs"] == []
    assert await host.variants() == []


async def test_onnx_and_openvino_files_can_be_imported_as_variants(host: Host) -> None:
    await host.import_tiny()
    await host.import_tiny("other")
    onnx_job = await host.export(format="onnx")
    openvino_job = await host.export(format="openvino")
    onnx_bytes = (await host.resolved(onnx_job["result"]["variant_id"])).entry.read_bytes()
    openvino_dir = (await host.resolved(openvino_job["result"]["variant_id"])).entry
    openvino_files = {path.name: path.read_bytes() for path in openvino_dir.iterdir()}
    # Start again from the .pt alone: the exports come back as the client's files.
    await host.client.delete("/v1/models/tiny", params={"cascade": "true"})
    await host.import_tiny()

    upload = {"file": ("exported.onnx", onnx_bytes)}
    first = await host.client.post("/v1/models/tiny/variants", files=upload)
    again = await host.client.post("/v1/models/tiny/variants", files=upload)
    mismatch = await host.client.post("/v1/models/other/variants", files=upload)
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:
        for name, content in sorted(openvino_files.items()):
            zipped.writestr(f"exported_openvino_model/{name}", content)
    zipped_upload = await host.client.post(
        "/v1/models/tiny/variants", files={"file": ("ov.zip", archive.getvalue())}
    )
    (host.model_root / "ov_openvino_model").mkdir()
    for name, content in openvino_files.items():
        (host.model_root / "ov_openvino_model" / name).write_bytes(content)
    by_path = await host.client.post("/v1/models/tiny/variants", json={"path": "ov_openvino_model"})

    assert first.status_code == 201, first.text
    assert first.json()["format"] == "onnx"
    assert first.json()["lineage"]["imgsz"] == IMGSZ
    assert first.json()["source"] == "upload"
    assert again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert_problem(mismatch, 422, "variant_mismatch")
    assert zipped_upload.status_code == 201, zipped_upload.text
    assert zipped_upload.json()["format"] == "openvino"
    assert by_path.status_code == 200, by_path.text  # the same files as the zip
    assert by_path.json()["id"] == zipped_upload.json()["id"]
    variants = await host.variants()
    assert sorted(v["format"] for v in variants) == ["onnx", "openvino"]
    for variant in variants:
        loaded = await anyio.to_thread.run_sync(
            load_variant, await host.resolved(variant["id"]), "detect"
        )
        assert await anyio.to_thread.run_sync(_boxes, loaded, host.data / "shots" / "img0.jpg")
    assert await host.variants("other") == []


async def test_torchscript_and_engine_uploads_are_refused_with_nothing_stored(host: Host) -> None:
    await host.import_tiny()
    (host.model_root / "m.torchscript").write_bytes(b"PK\x03\x04 not loaded")

    for name in ("m.torchscript", "m.engine", "m.plan"):
        as_variant = await host.client.post(
            "/v1/models/tiny/variants", files={"file": (name, b"PK\x03\x04 not loaded")}
        )
        as_model = await host.client.post("/v1/models", files={"file": (name, b"PK\x03\x04")})
        assert_problem(as_variant, 422, "format_not_importable")
        assert_problem(as_model, 422, "format_not_importable")
    by_path = await host.client.post("/v1/models", json={"path": "m.torchscript"})
    onnx_as_model = await host.client.post("/v1/models", files={"file": ("m.onnx", b"x")})

    assert_problem(by_path, 422, "format_not_importable")
    assert_problem(onnx_as_model, 422, "import_as_variant")
    assert [m["name"] for m in (await host.client.get("/v1/models")).json()["models"]] == ["tiny"]
    assert await host.variants() == []
    variants_dir = host.registry.path_of(await host.registry.get("tiny")).parent / "variants"
    assert not variants_dir.exists() or list(variants_dir.iterdir()) == []


async def test_a_model_with_variants_is_deleted_only_with_cascade(host: Host) -> None:
    await host.import_tiny()
    job = await host.export(format="onnx")
    folder = (await host.resolved(job["result"]["variant_id"])).folder

    refused = await host.client.delete("/v1/models/tiny")
    assert_problem(refused, 409, "model_has_variants")
    assert folder.is_dir()

    deleted = await host.client.delete("/v1/models/tiny", params={"cascade": "true"})
    assert deleted.status_code == 204
    assert not folder.exists()
    assert (await host.client.get("/v1/models/tiny")).status_code == 404


async def test_a_training_job_exports_its_model_in_the_same_job(host: Host) -> None:
    make_dataset(host.data / "ds")
    params = {"epochs": 1, "imgsz": IMGSZ, "batch": 8, "output_name": "trained"}
    job = {
        "kind": "training",
        "model": "yolo11n.yaml",
        "dataset": "ds/data.yaml",
        "params": {**params, "export": ["onnx"]},
    }
    response = await host.client.post("/v1/jobs", json=job)
    assert response.status_code == 202, response.text

    done = await wait_terminal(host.client, response.json()["id"], deadline_s=300)

    assert done["state"] == "succeeded", done["error"]
    [variant] = await host.variants("trained")
    assert done["result"]["variant_ids"] == [variant["id"]]
    assert done["result"]["model_id"] == variant["model_id"]
    assert (variant["format"], variant["source"]) == ("onnx", f"training:{done['id']}")
    assert variant["lineage"]["imgsz"] == IMGSZ
    trained = await host.registry.get("trained")
    [resolved] = await host.registry.variants.resolve(trained.id)
    loaded = await anyio.to_thread.run_sync(load_variant, resolved, "detect")
    await anyio.to_thread.run_sync(_boxes, loaded, host.data / "shots" / "img0.jpg")


async def test_an_engine_export_after_training_is_refused_on_a_cpu_host(host: Host) -> None:
    make_dataset(host.data / "ds")
    job = {
        "kind": "training",
        "model": "yolo11n.yaml",
        "dataset": "ds/data.yaml",
        "params": {"epochs": 1, "export": ["engine"]},
    }

    response = await host.client.post("/v1/jobs", json=job)

    assert_problem(response, 422, "export_unsupported")
    assert (await host.client.get("/v1/jobs")).json()["jobs"] == []


async def test_a_simulated_export_reports_stages_and_can_be_cancelled(
    client: httpx.AsyncClient,
) -> None:
    job = {
        "kind": "export",
        "model": "sim",
        "params": {"format": "onnx", "sim_seconds": 30, "sim_steps": 300},
    }
    created = (await client.post("/v1/jobs", json=job)).json()
    while (await client.get(f"/v1/jobs/{created['id']}")).json()["state"] != "running":
        await asyncio.sleep(0.02)

    await client.post(f"/v1/jobs/{created['id']}/cancel")
    done = await wait_terminal(client, created["id"])

    assert done["state"] == "cancelled"
    assert done["kind"] == "export"


async def test_an_export_whose_input_tensor_is_absurd_is_refused_at_submission_with_the_sum(
    client: httpx.AsyncClient,
) -> None:
    async def submit(**params: Any) -> httpx.Response:
        job = {"kind": "export", "model": "sim", "params": {"format": "onnx", **params}}
        return await client.post("/v1/jobs", json=job)

    huge = await submit(imgsz=4096, batch=1024)
    accepted = [
        await submit(sim_seconds=0, **params)
        for params in ({}, {"batch": 16}, {"batch": 32}, {"imgsz": 1280, "batch": 8})
    ]

    detail = assert_problem(huge, 422, "invalid_request")["detail"]
    assert "1024 x 3 x 4096 x 4096 float32 = 206158430208 bytes" in detail
    assert "at most 268435456 bytes (256 MiB)" in detail
    assert [response.status_code for response in accepted] == [202] * 4


async def test_int8_needs_a_checked_calibration_dataset_and_its_packages(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "nncf", None)  # import fails: as if not installed
    await host.import_tiny()
    make_dataset(host.data / "ds")
    int8 = {"format": "openvino", "int8": True, "imgsz": IMGSZ}

    async def submit(**fields: Any) -> httpx.Response:
        job = {"kind": "export", "model": "tiny", "params": int8, **fields}
        return await host.client.post("/v1/jobs", json=job)

    assert_problem(await submit(), 422, "invalid_request")
    assert_problem(await submit(dataset="nowhere/data.yaml"), 422, "dataset_not_found")
    accepted = await submit(dataset="ds/data.yaml")
    assert accepted.status_code == 202, accepted.text
    done = await wait_terminal(host.client, accepted.json()["id"], deadline_s=60)

    # OpenVINO's INT8 path needs nncf (the `yolo` extra carries it; see test_variant_precision).
    assert done["state"] == "failed"
    assert done["error"]["code"] == "export_dependency_missing"
    assert "'nncf'" in done["error"]["message"]
    assert await host.variants() == []


async def test_an_export_of_a_changed_pt_fails_and_retires_the_model(host: Host) -> None:
    await host.import_tiny()
    weights = host.registry.path_of(await host.registry.get("tiny"))
    weights.write_bytes(weights.read_bytes() + b"appended")

    done = await host.export(format="onnx")

    assert done["state"] == "failed"
    assert done["error"]["code"] == "model_tampered"
    assert (await host.client.get("/v1/models/tiny")).json()["usable"] is False
    assert await host.variants() == []
