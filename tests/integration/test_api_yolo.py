"""The real runtime through the HTTP API, on the CPU: the weights registry, inference jobs on
files under a data root or uploaded, warm models, artifacts, tampering, limits."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.conftest import serve, wait_terminal
from tests.support.problems import assert_problem
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.testing.yolo import (
    CLASS_NAMES,
    build_checkpoint,
    ensure_ultralytics,
    make_images,
    write_corrupt,
)

IMGSZ = 64


@dataclass
class Host:
    app: FastAPI
    client: httpx.AsyncClient
    data: Path
    weights: Path
    """A real checkpoint under the model root, named `tiny.pt`."""

    @property
    def models_dir(self) -> Path:
        settings: Settings = self.app.state.services.settings
        return settings.models_dir

    async def import_tiny(self) -> dict[str, Any]:
        response = await self.client.post("/v1/models", json={"path": "tiny.pt"})
        assert response.status_code == 201, response.text
        body: dict[str, Any] = response.json()
        return body

    async def infer(self, inputs: list[str], **params: Any) -> dict[str, Any]:
        job = {
            "kind": "inference",
            "model": "tiny",
            "inputs": inputs,
            "params": {"imgsz": IMGSZ, **params},
        }
        response = await self.client.post("/v1/jobs", json=job)
        assert response.status_code == 202, response.text
        body: dict[str, Any] = response.json()
        return body


@pytest.fixture
async def host(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    settings_factory: Callable[..., Settings],
) -> AsyncIterator[Host]:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    data, model_root = tmp_path / "data", tmp_path / "weights"
    make_images(data / "shots", 3)
    write_corrupt(data / "shots" / "broken.jpg")
    weights = build_checkpoint(model_root / "tiny.pt")
    settings = settings_factory(
        runtime="auto",
        database_url="",
        data_roots=[data],
        model_roots=[model_root],
        max_upload_bytes=64 << 20,
    )
    app = create_app(settings)
    async with serve(app) as client:
        yield Host(app, client, data, weights)


async def test_import_by_path_and_upload_fingerprints_once(host: Host) -> None:
    model = await host.import_tiny()
    assert model["name"] == "tiny"
    assert model["task"] == "detect"
    assert model["class_names"] == list(CLASS_NAMES)
    assert model["size_bytes"] == host.weights.stat().st_size
    assert model["source"].startswith("path:")
    assert (host.models_dir / f"{model['sha256']}.pt").is_file()

    again = await host.client.post(
        "/v1/models",
        files={"file": ("other-name.pt", host.weights.read_bytes())},
        data={"name": "other-name"},
    )
    assert again.status_code == 200, again.text
    assert again.json()["id"] == model["id"]

    listed = (await host.client.get("/v1/models")).json()["models"]
    assert [m["id"] for m in listed] == [model["id"]]
    by_name = await host.client.get("/v1/models/tiny")
    assert by_name.json()["sha256"] == model["sha256"]


async def test_an_upload_without_a_name_gets_a_valid_name_from_its_file(host: Host) -> None:
    upload = {"file": ("my weights (v2).pt", host.weights.read_bytes())}
    response = await host.client.post("/v1/models", files=upload)
    assert response.status_code == 201, response.text
    assert response.json()["name"] == "my-weights-v2"
    by_name = await host.client.get("/v1/models/my-weights-v2")
    assert by_name.json()["id"] == response.json()["id"]
    given = await host.client.post("/v1/models", files=upload, data={"name": "has spaces"})
    assert_problem(given, 422, "invalid_request")


async def test_weights_that_are_not_a_checkpoint_are_refused_and_not_kept(host: Host) -> None:
    response = await host.client.post(
        "/v1/models", files={"file": ("bad.pt", b"definitely not a checkpoint" * 100)}
    )
    assert_problem(response, 422, "invalid_weights")
    assert (await host.client.get("/v1/models")).json()["models"] == []
    assert [p.name for p in host.models_dir.iterdir()] == []


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"path": "../data/shots/img0.jpg"}, 422, "path_outside_roots"),
        ({"path": "missing.pt"}, 422, "file_not_found"),
        ({"path": "tiny.pt", "name": "has spaces"}, 422, "invalid_request"),
        ({"path": "tiny.pt", "name": ".."}, 422, "invalid_request"),  # not addressable in a URL
        ({"path": "tiny.pt", "colour": "red"}, 422, "invalid_request"),
    ],
)
async def test_bad_imports_are_refused(
    host: Host, body: dict[str, Any], status: int, code: str
) -> None:
    assert_problem(await host.client.post("/v1/models", json=body), status, code)


async def test_other_media_types_are_refused(host: Host) -> None:
    response = await host.client.post(
        "/v1/models", content=b"x", headers={"content-type": "text/plain"}
    )
    assert_problem(response, 415, "unsupported_media_type")


async def test_inference_on_files_under_a_data_root(host: Host) -> None:
    await host.import_tiny()
    job = await host.infer(["shots/*.jpg"])
    done = await wait_terminal(host.client, job["id"], deadline_s=60)
    assert done["state"] == "succeeded", done
    assert done["devices"] == ["cpu"]
    assert done["progress"] == {"done": 4, "total": 4, "unit": "images", "detail": None}
    assert done["result"] == {
        "task": "detect",
        "images": 4,
        "detections": done["result"]["detections"],
        "failed_images": 1,
        "format": "pt",
        "variant_id": None,
    }
    result = (await host.client.get(f"/v1/jobs/{job['id']}/result")).json()
    sources = [image["source"] for image in result["images"]]
    assert sources == ["shots/broken.jpg", "shots/img0.jpg", "shots/img1.jpg", "shots/img2.jpg"]
    assert result["images"][0]["error"] == "cannot decode the file as an image"
    first = result["images"][1]
    assert (first["width"], first["height"]) == (160, 120)
    assert first["detections"], "the fixture model detects class 0 everywhere"
    assert first["detections"][0]["class_name"] == CLASS_NAMES[0]


async def test_the_second_job_finds_its_model_warm(host: Host) -> None:
    await host.import_tiny()
    runtime = host.app.state.services.runtime
    for expected_loads in (1, 1):
        job = await host.infer(["shots/img0.jpg"])
        assert (await wait_terminal(host.client, job["id"], deadline_s=60))["state"] == "succeeded"
        assert runtime.inference.loads == expected_loads
    devices = (await host.client.get("/v1/devices")).json()
    assert devices["runtime"] == "ultralytics"
    (cpu,) = devices["devices"]
    assert (cpu["id"], cpu["busy"], cpu["jobs"], cpu["models"]) == ("cpu", 0, [], ["tiny"])
    assert cpu["healthy"] is True
    assert cpu["memory_used_bytes"] is None  # no NVML reading for a CPU lane


async def test_annotated_images_are_artifacts(host: Host) -> None:
    await host.import_tiny()
    job = await host.infer(["shots/img1.jpg"], save_annotated=True)
    assert (await wait_terminal(host.client, job["id"], deadline_s=60))["state"] == "succeeded"
    listed = (await host.client.get(f"/v1/jobs/{job['id']}/artifacts")).json()["artifacts"]
    assert [a["name"] for a in listed] == ["00000_img1.jpg"]
    image = await host.client.get(listed[0]["url"])
    assert image.status_code == 200
    assert image.content[:2] == b"\xff\xd8"
    outside = await host.client.get(f"/v1/jobs/{job['id']}/artifacts/result.json")
    assert_problem(outside, 404, "artifact_not_found")
    escape = await host.client.get(f"/v1/jobs/{job['id']}/artifacts/..%2Fresult.json")
    assert escape.status_code == 404


async def test_uploaded_images_are_kept_with_the_job(host: Host) -> None:
    await host.import_tiny()
    shots = sorted((host.data / "shots").glob("img*.jpg"))
    response = await host.client.post(
        "/v1/jobs/inference",
        data={"model": "tiny", "params": f'{{"imgsz": {IMGSZ}}}'},
        files=[("images", (p.name, p.read_bytes(), "image/jpeg")) for p in shots[:2]]
        + [("images", ("junk.jpg", b"not an image", "image/jpeg"))],
    )
    assert response.status_code == 202, response.text
    job = response.json()
    assert job["inputs"] == ["img0.jpg", "img1.jpg", "junk.jpg"]
    stored = sorted(
        p.name for p in (host.data.parent / "var" / "jobs" / job["id"] / "inputs").iterdir()
    )
    assert stored == ["00000.jpg", "00001.jpg", "00002.jpg"]
    done = await wait_terminal(host.client, job["id"], deadline_s=60)
    assert done["state"] == "succeeded"
    result = (await host.client.get(f"/v1/jobs/{job['id']}/result")).json()
    assert [image["source"] for image in result["images"]] == ["img0.jpg", "img1.jpg", "junk.jpg"]
    assert "error" in result["images"][2]


async def test_uploads_decoded_while_queued_detect_as_files_read_by_the_lane(host: Host) -> None:
    await host.import_tiny()
    shots = sorted((host.data / "shots").glob("img*.jpg"))
    read = await host.infer([f"shots/{p.name}" for p in shots])
    uploaded = await host.client.post(
        "/v1/jobs/inference",
        data={"model": "tiny", "params": f'{{"imgsz": {IMGSZ}}}'},
        files=[("images", (p.name, p.read_bytes(), "image/jpeg")) for p in shots],
    )
    assert uploaded.status_code == 202, uploaded.text
    for job in (read, uploaded.json()):
        assert (await wait_terminal(host.client, job["id"], deadline_s=60))["state"] == "succeeded"
    results = [
        (await host.client.get(f"/v1/jobs/{job['id']}/result")).json()["images"]
        for job in (read, uploaded.json())
    ]
    assert [image["detections"] for image in results[1]] == [
        image["detections"] for image in results[0]
    ]
    metrics = (await host.client.get("/metrics")).text
    assert f"yolo_orch_images_decoded_ahead_total {float(len(shots))}" in metrics


async def test_bad_uploads_are_refused(host: Host) -> None:
    await host.import_tiny()
    image = ("images", ("a.jpg", b"x", "image/jpeg"))
    bad_params = await host.client.post(
        "/v1/jobs/inference", data={"model": "tiny", "params": '{"conf": 7}'}, files=[image]
    )
    assert_problem(bad_params, 422, "invalid_request")
    no_images = await host.client.post("/v1/jobs/inference", data={"model": "tiny"})
    assert_problem(no_images, 422, "invalid_request")
    unknown = await host.client.post("/v1/jobs/inference", data={"model": "nope"}, files=[image])
    assert_problem(unknown, 404, "model_not_found")
    assert (await host.client.get("/v1/jobs")).json()["jobs"] == []
    assert not list((host.data.parent / "var" / "jobs").glob("*/inputs"))


async def test_bodies_over_their_limit_get_413(
    tmp_path: Path, settings_factory: Callable[..., Settings]
) -> None:
    settings = settings_factory(max_request_bytes=2048, max_upload_bytes=4096)
    async with serve(create_app(settings)) as client:
        big_json = {"kind": "inference", "model": "sim", "inputs": ["x" * 100] * 30}
        assert_problem(await client.post("/v1/jobs", json=big_json), 413, "body_too_large")
        big_upload = [("images", ("a.jpg", b"x" * 5000, "image/jpeg"))]
        response = await client.post("/v1/jobs/inference", data={"model": "sim"}, files=big_upload)
        assert_problem(response, 413, "body_too_large")
        small_upload = [("images", ("a.jpg", b"x" * 3000, "image/jpeg"))]
        response = await client.post(
            "/v1/jobs/inference", data={"model": "sim"}, files=small_upload
        )
        assert response.status_code == 202


@pytest.mark.parametrize(
    ("inputs", "code"),
    [
        (["../weights/tiny.pt"], "path_outside_roots"),
        (["/etc/passwd"], "path_outside_roots"),
        (["shots/*.png"], "input_not_found"),
    ],
)
async def test_inputs_outside_the_data_roots_are_refused(
    host: Host, inputs: list[str], code: str
) -> None:
    await host.import_tiny()
    body = {"kind": "inference", "model": "tiny", "inputs": inputs}
    assert_problem(await host.client.post("/v1/jobs", json=body), 422, code)
    assert (await host.client.get("/v1/jobs")).json()["jobs"] == []


async def test_unknown_model_is_refused_at_submission(host: Host) -> None:
    body = {"kind": "inference", "model": "tiny", "inputs": ["shots/img0.jpg"]}
    assert_problem(await host.client.post("/v1/jobs", json=body), 404, "model_not_found")


async def test_delete_waits_for_the_jobs_that_use_the_model(host: Host) -> None:
    model = await host.import_tiny()
    make_images(host.data / "many", 40, seed=3)
    busy = await host.infer(["many/*.jpg"], imgsz=160)
    queued = await host.infer(["shots/img0.jpg"])
    refused = await host.client.delete("/v1/models/tiny")
    problem = assert_problem(refused, 409, "model_in_use")
    assert queued["id"] in problem["detail"] or busy["id"] in problem["detail"]
    for job in (busy, queued):
        await wait_terminal(host.client, job["id"], deadline_s=120)
    assert (await host.client.delete("/v1/models/tiny")).status_code == 204
    assert not (host.models_dir / f"{model['sha256']}.pt").exists()
    assert_problem(await host.client.get("/v1/models/tiny"), 404, "model_not_found")


async def test_tampered_weights_fail_the_job_and_retire_the_model(host: Host) -> None:
    model = await host.import_tiny()
    stored = host.models_dir / f"{model['sha256']}.pt"
    stored.write_bytes(stored.read_bytes() + b"tampered")
    job = await host.infer(["shots/img0.jpg"])
    failed = await wait_terminal(host.client, job["id"], deadline_s=60)
    assert failed["state"] == "failed"
    assert failed["error"]["code"] == "model_tampered"
    async with asyncio.timeout(5):
        while (await host.client.get("/v1/models/tiny")).json()["usable"]:
            await asyncio.sleep(0.02)
    body = {"kind": "inference", "model": "tiny", "inputs": ["shots/img0.jpg"]}
    assert_problem(await host.client.post("/v1/jobs", json=body), 409, "model_unusable")
