"""A running stream that names an alias switches to the model the alias is moved to, between two
frames: its source is not reopened, its frames stay numbered without a gap, the first made by
the old model and the rest by the new (the simulated runtime, whose detector needs no weights)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import serve, wait_terminal
from tests.integration.test_api_aliases import PRODUCTION, add_model
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.testing.video import make_video


@pytest.fixture
async def client(
    tmp_path: Path, settings_factory: Callable[..., Settings]
) -> AsyncIterator[httpx.AsyncClient]:
    make_video(tmp_path / "data" / "clip.mp4", frames=30, size=(160, 120))
    settings = settings_factory(data_roots=[tmp_path / "data"])
    async with serve(create_app(settings)) as client:
        yield client


async def frames(client: httpx.AsyncClient, job_id: str) -> list[dict[str, Any]]:
    page = await client.get(f"/v1/jobs/{job_id}/result", params={"since": 0, "limit": 1000})
    assert page.status_code == 200, page.text
    found: list[dict[str, Any]] = page.json()["frames"]
    return found


async def progress_detail(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    progress = (await client.get(f"/v1/jobs/{job_id}")).json()["progress"] or {}
    detail: dict[str, Any] = progress.get("detail", {})
    return detail


async def frames_of(
    client: httpx.AsyncClient, job_id: str, model_id: str, at_least: int
) -> list[dict[str, Any]]:
    async with asyncio.timeout(20):
        while True:
            seen = await frames(client, job_id)
            if sum(frame["model_id"] == model_id for frame in seen) >= at_least:
                return seen
            await asyncio.sleep(0.05)


async def test_a_stream_naming_an_alias_switches_model_when_the_alias_moves(
    client: httpx.AsyncClient,
) -> None:
    v1 = await add_model(client, "detector-v1")
    v2 = await add_model(client, "detector-v2")
    await client.put(PRODUCTION, json={"model": "detector-v1"})
    job = {
        "kind": "stream",
        "model": "detector@production",
        "sources": ["clip.mp4"],
        "params": {"max_fps": 30},
    }
    submitted = await client.post("/v1/jobs", json=job)
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["id"]
    await frames_of(client, job_id, v1.id, at_least=5)

    moved = await client.put(PRODUCTION, json={"model": "detector-v2"})
    assert moved.status_code == 200
    seen = await frames_of(client, job_id, v2.id, at_least=5)

    models = [frame["model_id"] for frame in seen]
    switch_at = models.index(v2.id)
    assert set(models[:switch_at]) == {v1.id}
    assert set(models[switch_at:]) == {v2.id}
    assert [frame["seq"] for frame in seen] == list(range(1, len(seen) + 1))
    numbers = [frame["frame"] for frame in seen]
    assert numbers == sorted(numbers)  # one source, read on: never reopened, never reordered
    async with asyncio.timeout(10):  # its progress and its record say which model it runs now
        while (await progress_detail(client, job_id)).get("model_id") != v2.id:
            await asyncio.sleep(0.05)
        while (await client.get(f"/v1/jobs/{job_id}")).json()["model_id"] != v2.id:
            await asyncio.sleep(0.05)
    assert (await client.post(f"/v1/jobs/{job_id}/cancel")).status_code in (200, 202)
    ended = await wait_terminal(client, job_id, deadline_s=20)
    assert ended["state"] == "cancelled"
    assert ended["progress"]["detail"]["sources"][0]["reconnects"] == 0
