"""Exported variants on Ray nodes, with the real runtime on a cluster of CPU lanes: the variant a
job runs travels to the node that lacked it, is verified there file by file and kept, and runs
with the thread lanes' runner; a tampered one fails its job `model_tampered` and is retired."""

from __future__ import annotations

import shutil
import warnings
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.conftest import infer_shots, serve, shots_job
from tests.support.ray_real import IMGSZ, cpu_cluster, cpu_host_settings
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.testing.yolo import CLASS_NAMES, build_checkpoint, ensure_ultralytics, make_images

__all__ = ["cpu_cluster"]  # the fixture, shared with the real runtime's tests

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`tiny.pt` with its ONNX (`tiny.onnx`) and OpenVINO (`tiny_openvino_model/`) exports,
    static at IMGSZ: made once for the module."""
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    from ultralytics.models import YOLO

    folder = tmp_path_factory.mktemp("exported")
    weights = build_checkpoint(folder / "tiny.pt")
    with warnings.catch_warnings():  # the exporters call what torch deprecated
        warnings.simplefilter("ignore")
        for export_format in ("onnx", "openvino"):
            YOLO(str(weights)).export(format=export_format, imgsz=IMGSZ, device="cpu")
    return folder


@dataclass
class Host:
    app: FastAPI
    client: httpx.AsyncClient
    node_cache: Path

    async def import_variant(self, path: str) -> dict[str, Any]:
        response = await self.client.post("/v1/models/tiny/variants", json={"path": path})
        assert response.status_code == 201, response.text
        body: dict[str, Any] = response.json()
        return body

    async def infer(self, **params: Any) -> dict[str, Any]:
        return await infer_shots(self.client, **{"imgsz": IMGSZ, **params})

    async def nodes(self) -> dict[str, list[dict[str, Any]]]:
        """By node name: the variants it keeps."""
        nodes = (await self.client.get("/v1/devices")).json()["nodes"]
        return {node["name"]: node["variants"] for node in nodes}

    def kept(self, sha256: str) -> list[Path]:
        """The variant's folders in the nodes' caches."""
        return sorted(self.node_cache.glob(f"*/{sha256}.variant"))

    def kept_on(self, sha256: str, node: str) -> list[Path]:
        """Its folder in the cache of `node` (a lane's prefix)."""
        return [folder for folder in self.kept(sha256) if folder.parent.name[:12] == node]

    def registry_folder(self, variant_id: str) -> Path:
        settings: Settings = self.app.state.services.settings
        return settings.models_dir / "variants" / variant_id


@pytest.fixture
async def host(
    tmp_path: Path,
    settings_factory: Callable[..., Settings],
    cpu_cluster: Any,
    exported: Path,
) -> AsyncIterator[Host]:
    data, weights = tmp_path / "data", tmp_path / "weights"
    make_images(data / "shots", 1)
    shutil.copytree(exported, weights)
    settings = cpu_host_settings(settings_factory, cpu_cluster, tmp_path, data, weights)
    app = create_app(settings)
    async with serve(app) as client:
        imported = await client.post("/v1/models", json={"path": "tiny.pt"})
        assert imported.status_code == 201, imported.text
        yield Host(app, client, tmp_path / "node-cache")


async def classes_found(host: Host, job: dict[str, Any]) -> set[str]:
    assert job["state"] == "succeeded", job
    result = (await host.client.get(f"/v1/jobs/{job['id']}/result")).json()
    return {d["class_name"] for d in result["images"][0]["detections"]}


async def test_a_variant_travels_to_the_node_that_runs_it_and_stays_there(host: Host) -> None:
    onnx = await host.import_variant("tiny.onnx")
    openvino = await host.import_variant("tiny_openvino_model")
    assert all(variants == [] for variants in (await host.nodes()).values())

    named = await host.infer(format="onnx")
    auto = await host.infer()
    pt = await host.infer(format="pt")

    ran = [(job["result"]["format"], job["result"]["variant_id"]) for job in (named, auto, pt)]
    assert ran == [("onnx", onnx["id"]), ("openvino", openvino["id"]), ("pt", None)]
    for job in (named, auto, pt):
        assert await classes_found(host, job) == {CLASS_NAMES[0]}
    log = (await host.client.get(f"/v1/jobs/{named['id']}/logs")).text
    assert f"runs onnx variant {onnx['id']} on cpu" in log, log
    held = await host.nodes()
    node = named["devices"][0].split("/")[0]
    size = onnx["size_bytes"]
    assert {"id": onnx["id"], "model": "tiny", "format": "onnx", "size_bytes": size} in held[node]
    ran_auto = auto["devices"][0].split("/")[0]
    assert openvino["id"] in [variant["id"] for variant in held[ran_auto]], held
    served = (host.registry_folder(onnx["id"]) / "model.onnx").read_bytes()
    assert [(f / "model.onnx").read_bytes() for f in host.kept_on(onnx["sha256"], node)] == [served]

    # a kept copy that changed on the node is fetched again
    for folder in host.kept(onnx["sha256"]):
        (folder / "model.onnx").write_bytes(b"corrupted on the node")
    again = await host.infer(format="onnx")
    assert again["result"]["variant_id"] == onnx["id"]
    assert await classes_found(host, again) == {CLASS_NAMES[0]}
    [kept] = host.kept_on(onnx["sha256"], again["devices"][0].split("/")[0])
    assert (kept / "model.onnx").read_bytes() == served


async def test_a_tampered_variant_fails_model_tampered_and_only_the_variant_is_retired(
    host: Host,
) -> None:
    onnx = await host.import_variant("tiny.onnx")
    served = host.registry_folder(onnx["id"]) / "model.onnx"
    served.write_bytes(served.read_bytes()[:-8] + b"tampered")  # changed since its import

    tampered = await host.infer(format="onnx")
    assert (tampered["state"], tampered["error"]["code"]) == ("failed", "model_tampered"), tampered
    assert onnx["id"] in tampered["error"]["message"]
    assert host.kept(onnx["sha256"]) == []
    model = (await host.client.get("/v1/models/tiny")).json()
    assert [v["usable"] for v in model["variants"]] == [False]
    assert model["usable"] is True

    refused = await host.client.post("/v1/jobs", json=shots_job(IMGSZ, format="onnx"))
    assert refused.status_code == 422, refused.text
    assert refused.json()["code"] == "format_not_available"
    after = await host.infer()  # auto: the .pt, still usable
    assert after["result"]["format"] == "pt"
    assert await classes_found(host, after) == {CLASS_NAMES[0]}
