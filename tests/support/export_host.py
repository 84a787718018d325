"""An app with the real runtime and a tiny imported model, for the tests of exports, variants
and inference formats."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.conftest import infer_shots, serve, wait_terminal
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.registry.models import ModelRegistry
from yolo_orch.registry.resolutions import ResolvedVariant
from yolo_orch.testing.yolo import (
    build_checkpoint,
    ensure_ultralytics,
    make_images,
)

IMGSZ = 64


@dataclass
class Host:
    app: FastAPI
    client: httpx.AsyncClient
    data: Path
    model_root: Path

    @property
    def registry(self) -> ModelRegistry:
        registry: ModelRegistry = self.app.state.services.models
        return registry

    async def import_tiny(self, name: str = "tiny") -> dict[str, Any]:
        response = await self.client.post("/v1/models", json={"path": f"{name}.pt"})
        assert response.status_code == 201, response.text
        body: dict[str, Any] = response.json()
        return body

    async def export(self, model: str = "tiny", **params: Any) -> dict[str, Any]:
        job = {"kind": "export", "model": model, "params": {"imgsz": IMGSZ, **params}}
        response = await self.client.post("/v1/jobs", json=job)
        assert response.status_code == 202, response.text
        return await wait_terminal(self.client, response.json()["id"], deadline_s=120)

    async def variants(self, model: str = "tiny") -> list[dict[str, Any]]:
        response = await self.client.get(f"/v1/models/{model}")
        assert response.status_code == 200, response.text
        variants: list[dict[str, Any]] = response.json()["variants"]
        return variants

    async def resolved(self, variant_id: str) -> ResolvedVariant:
        model = await self.registry.get("tiny")
        everything = await self.registry.variants.resolve(model.id)
        return next(r for r in everything if r.variant.id == variant_id)


@pytest.fixture
def host_settings() -> dict[str, Any]:
    """More settings for `host`: a test parametrizes this to change them."""
    return {}


@pytest.fixture
async def host(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    settings_factory: Callable[..., Settings],
    host_settings: dict[str, Any],
) -> AsyncIterator[Host]:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    data, model_root = tmp_path / "data", tmp_path / "weights"
    make_images(data / "shots", 1)
    build_checkpoint(model_root / "tiny.pt")
    build_checkpoint(model_root / "other.pt", class_names=("cat", "dog"))
    settings = settings_factory(
        runtime="auto",
        database_url="",
        data_roots=[data],
        model_roots=[model_root],
        max_upload_bytes=64 << 20,
        **host_settings,
    )
    app = create_app(settings)
    async with serve(app) as client:
        yield Host(app, client, data, model_root)


Detection = tuple[float, float, float, float, float]


async def infer(host: Host, **params: Any) -> dict[str, Any]:
    return await infer_shots(host.client, **{"imgsz": IMGSZ, **params})


async def detections(host: Host, job: dict[str, Any]) -> list[list[Detection]]:
    assert job["state"] == "succeeded", job["error"]
    result = (await host.client.get(f"/v1/jobs/{job['id']}/result")).json()
    return [
        sorted(
            (*(d["box"][k] for k in ("x1", "y1", "x2", "y2")), d["confidence"])
            for d in image["detections"]
        )
        for image in result["images"]
    ]
