from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.on_ray.fixtures import cluster, own_cluster  # noqa: F401 - shared with tests/acceptance
from yolo_orch.app import create_app
from yolo_orch.config import MEMORY_DATABASE_URL, Settings
from yolo_orch.testing import TERMINAL_STATES

# Live-camera fixtures and a real Label Studio (`label_studio`), shared by every tier.
pytest_plugins = [
    "tests.support.stream_sources",
    "tests.support.label_studio",
    "tests.support.postgres",
]

TIERS = frozenset({"unit", "integration", "acceptance", "proof"})
"""The folders under tests/ that are tiers: each test is marked with its folder's name, so that
`pytest -m unit` runs the unit tier (docs/testing.md says what each costs)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    root = Path(__file__).parent
    for item in items:
        folder = item.path.relative_to(root).parts[0]
        if folder in TIERS:
            item.add_marker(folder)


@pytest.fixture
def settings_factory(tmp_path: Path) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "data_dir": tmp_path / "var",
            "database_url": MEMORY_DATABASE_URL,
            "runtime": "simulated",
            "shutdown_grace_s": 2.0,
        }
        values.update(overrides)
        return Settings(**values)

    return make


@pytest.fixture
async def client(settings_factory: Callable[..., Settings]) -> AsyncIterator[httpx.AsyncClient]:
    async with serve(create_app(settings_factory())) as client:
        yield client


class serve:
    """Runs the app's real lifespan around an in-process HTTP client."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app

    async def __aenter__(self) -> httpx.AsyncClient:
        self._lifespan = self.app.router.lifespan_context(self.app)
        await self._lifespan.__aenter__()
        self._client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app), base_url="http://localhost"
        )
        return self._client

    async def __aexit__(self, *exc: object) -> None:
        await self._client.aclose()
        await self._lifespan.__aexit__(None, None, None)


def sim_job(**fields: Any) -> dict[str, Any]:
    params = fields.pop("params", {})
    job: dict[str, Any] = {"kind": "inference", "model": "sim", "inputs": ["a.jpg", "b.jpg"]}
    job.update(fields)
    job["params"] = {"sim_seconds": 0.05, "sim_steps": 2, **params}
    return job


async def wait_terminal(
    client: httpx.AsyncClient, job_id: str, deadline_s: float = 10.0
) -> dict[str, Any]:
    async with asyncio.timeout(deadline_s):
        while True:
            response = await client.get(f"/v1/jobs/{job_id}")
            body: dict[str, Any] = response.json()
            if body["state"] in TERMINAL_STATES:
                return body
            await asyncio.sleep(0.02)


def shots_job(imgsz: int, **params: Any) -> dict[str, Any]:
    """An inference job of model `tiny` on `shots/*.jpg` (the real-runtime fixtures' names)."""
    return {
        "kind": "inference",
        "model": "tiny",
        "inputs": ["shots/*.jpg"],
        "params": {"imgsz": imgsz, **params},
    }


async def infer_shots(client: httpx.AsyncClient, imgsz: int, **params: Any) -> dict[str, Any]:
    """`shots_job`, submitted and waited for."""
    response = await client.post("/v1/jobs", json=shots_job(imgsz, **params))
    assert response.status_code == 202, response.text
    return await wait_terminal(client, response.json()["id"], deadline_s=120)
