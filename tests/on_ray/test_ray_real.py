"""The real ultralytics runtime on Ray nodes, through the HTTP API, on a cluster of CPU lanes:
images travel to the node as bytes, weights through the object store, and a training reads its
dataset under a shared root."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import serve, wait_terminal
from tests.support.ray_real import IMGSZ, cpu_cluster, cpu_host_settings
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.testing.training import make_dataset
from yolo_orch.testing.yolo import CLASS_NAMES, build_checkpoint, ensure_ultralytics, make_images

__all__ = ["cpu_cluster"]  # the fixture, from tests/support/ray_real.py

pytestmark = pytest.mark.ray


@dataclass
class Host:
    client: httpx.AsyncClient
    data: Path
    shared: Path


@pytest.fixture
async def host(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    settings_factory: Callable[..., Settings],
    cpu_cluster: Any,
) -> AsyncIterator[Host]:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    data, weights = tmp_path / "data", tmp_path / "weights"
    shared = data / "shared"
    make_images(data / "shots", 1)
    build_checkpoint(weights / "tiny.pt")
    settings = cpu_host_settings(
        settings_factory, cpu_cluster, tmp_path, data, weights, shared_data_roots=[shared]
    )
    async with serve(create_app(settings)) as client:
        lanes = [device["id"] for device in (await client.get("/v1/devices")).json()["devices"]]
        assert len(lanes) == 2, lanes
        assert all(lane.endswith("/cpu") for lane in lanes), lanes
        yield Host(client, data, shared)


async def test_inference_runs_on_a_node_with_its_images_sent_as_bytes(host: Host) -> None:
    imported = await host.client.post("/v1/models", json={"path": "tiny.pt"})
    assert imported.status_code == 201, imported.text
    model = imported.json()
    params = {"imgsz": IMGSZ}
    upload = (host.data / "shots" / "img0.jpg").read_bytes()
    uploaded = await host.client.post(
        "/v1/jobs/inference",
        data={"model": "tiny", "params": json.dumps(params)},
        files=[
            ("images", ("mine.jpg", upload, "image/jpeg")),
            ("images", ("junk.jpg", b"not an image", "image/jpeg")),
        ],
    )
    assert uploaded.status_code == 202, uploaded.text
    body = {"kind": "inference", "model": "tiny", "inputs": ["shots/*.jpg"], "params": params}
    under_root = await host.client.post("/v1/jobs", json=body)
    assert under_root.status_code == 202, under_root.text

    for job, names in ((uploaded.json(), ["mine.jpg", "junk.jpg"]), (under_root.json(), None)):
        done = await wait_terminal(host.client, job["id"], deadline_s=120)
        assert done["state"] == "succeeded", done
        assert done["devices"][0].endswith("/cpu")
        result = (await host.client.get(f"/v1/jobs/{job['id']}/result")).json()
        images = result["images"]
        assert [image["source"] for image in images] == (names or ["shots/img0.jpg"])
        found = images[0]
        assert (found["width"], found["height"]) == (160, 120)
        assert found["detections"], found
        assert {d["class_name"] for d in found["detections"]} == {CLASS_NAMES[0]}
        if names:
            assert images[1]["error"] == "cannot decode the file as an image"
        assert done["result"]["format"] == "pt"

    nodes = (await host.client.get("/v1/devices")).json()["nodes"]
    assert any(model["name"] in node["models"] for node in nodes), nodes

    variant = {**body, "params": {**params, "format": "onnx"}}
    refused = await host.client.post("/v1/jobs", json=variant)
    assert refused.status_code == 422, refused.text
    assert refused.json()["code"] == "format_not_available"
    assert refused.json()["detail"].endswith("formats it can run: pt")  # it has no variants


def training(dataset: str) -> dict[str, Any]:
    return {
        "kind": "training",
        "model": "yolo11n.yaml",
        "dataset": dataset,
        "params": {"epochs": 1, "imgsz": 32, "batch": 8, "output_name": "trained"},
    }


async def test_a_training_on_a_node_reads_its_dataset_under_a_shared_root(host: Host) -> None:
    """And registers its model on the server, which a validation on a node then loads."""
    make_dataset(host.shared / "ds", n_train=8, n_val=4, size=32)
    job = await host.client.post("/v1/jobs", json=training("shared/ds/data.yaml"))
    assert job.status_code == 202, job.text
    done = await wait_terminal(host.client, job.json()["id"], deadline_s=180)
    assert done["state"] == "succeeded", done
    assert done["result"]["epochs"] == 1

    model = (await host.client.get("/v1/models/trained")).json()
    assert model["id"] == done["result"]["model_id"]
    assert model["source"] == f"training:{done['id']}"
    artifacts = (await host.client.get(f"/v1/jobs/{done['id']}/artifacts")).json()["artifacts"]
    assert {a["name"] for a in artifacts} >= {"best.pt", "last.pt"}
    history = (await host.client.get(f"/v1/jobs/{done['id']}/metrics")).json()
    assert [entry["epoch"] for entry in history] == [1]

    # the model it produced, registered here, goes back to a node to be validated
    validation = {
        "kind": "validation",
        "model": "trained",
        "dataset": "shared/ds/data.yaml",
        "params": {"imgsz": 32, "batch": 4},
    }
    job = await host.client.post("/v1/jobs", json=validation)
    assert job.status_code == 202, job.text
    validated = await wait_terminal(host.client, job.json()["id"], deadline_s=120)
    assert validated["state"] == "succeeded", validated
    assert set(validated["result"]["metrics"]) == {"precision", "recall", "mAP50", "mAP50-95"}


async def test_a_dataset_outside_the_shared_roots_fails_clearly(host: Host) -> None:
    make_dataset(host.data / "local", n_train=2, n_val=1, size=32)
    job = await host.client.post("/v1/jobs", json=training("local/data.yaml"))
    assert job.status_code == 202, job.text
    done = await wait_terminal(host.client, job.json()["id"], deadline_s=60)
    assert (done["state"], done["error"]["code"]) == ("failed", "dataset_not_shared"), done
    assert "'local/data.yaml' is not under shared_data_roots" in done["error"]["message"]


async def test_exports_are_refused_for_ray_lanes(host: Host) -> None:
    assert (await host.client.post("/v1/models", json={"path": "tiny.pt"})).status_code == 201
    export = {"kind": "export", "model": "tiny", "params": {"format": "onnx", "imgsz": IMGSZ}}
    exporting = training("shared/ds/data.yaml")
    exporting["params"]["export"] = ["onnx"]
    make_dataset(host.shared / "ds", n_train=2, n_val=1, size=32)
    for body in (export, exporting):
        refused = await host.client.post("/v1/jobs", json=body)
        assert refused.status_code == 422, refused.text
        assert refused.json()["code"] == "export_unsupported"
    assert (await host.client.get("/v1/jobs")).json()["jobs"] == []


async def test_a_warm_lane_runs_jobs_of_different_models_one_after_another(host: Host) -> None:
    """A lane's actor keeps one runtime warm across jobs; each job's own model must still be the
    one fetched and checked for it (another model's jobs ran on that lane before)."""
    build_checkpoint(host.data.parent / "weights" / "other.pt", ("ship", "plane"))
    for name in ("tiny.pt", "other.pt"):
        imported = await host.client.post("/v1/models", json={"path": name})
        assert imported.status_code == 201, imported.text

    lanes_by_model: dict[str, set[str]] = {"tiny": set(), "other": set()}
    for model in ("tiny", "other", "tiny", "other"):
        body = {
            "kind": "inference",
            "model": model,
            "inputs": ["shots/*.jpg"],
            "params": {"imgsz": IMGSZ},
        }
        job = (await host.client.post("/v1/jobs", json=body)).json()
        done = await wait_terminal(host.client, job["id"], deadline_s=120)
        assert done["state"] == "succeeded", done
        lanes_by_model[model].add(done["devices"][0])
        result = (await host.client.get(f"/v1/jobs/{job['id']}/result")).json()
        found = {d["class_name"] for d in result["images"][0]["detections"]}
        assert found == {CLASS_NAMES[0] if model == "tiny" else "ship"}

    # jobs one after another take the first free lane: both models ran on one lane
    assert lanes_by_model["tiny"] & lanes_by_model["other"]
