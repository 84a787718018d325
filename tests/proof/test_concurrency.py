"""Concurrency against one real server on SQLite: 500 concurrent submits and polls produce no
5xx and no "database is locked"; 50 concurrent submits with one Idempotency-Key make one job."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import httpx
import pytest

from tests.support.servers import ServerFactory, list_all_jobs
from yolo_orch.testing import sim_inference

REQUESTS = 500
CONNECTIONS = 100


async def _burst(url: str) -> tuple[Counter[int], list[str]]:
    """REQUESTS requests at once, submits and polls interleaved; the status codes, and the
    bodies of the 5xx answers."""
    limits = httpx.Limits(max_connections=CONNECTIONS, max_keepalive_connections=CONNECTIONS)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        seed = await client.post("/v1/jobs", json=sim_inference("seed.jpg", sim_seconds=0))
        assert seed.status_code == 202, seed.text
        seed_id = seed.json()["id"]

        async def one(i: int) -> httpx.Response:
            if i % 2 == 0:
                body = sim_inference(f"c-{i}.jpg", sim_seconds=0.01, sim_steps=1)
                return await client.post("/v1/jobs", json=body)
            if i % 4 == 1:
                return await client.get(f"/v1/jobs/{seed_id}")
            return await client.get("/v1/jobs", params={"limit": 20})

        responses = await asyncio.gather(*(one(i) for i in range(REQUESTS)))
    codes = Counter(r.status_code for r in responses)
    errors = [r.text for r in responses if r.status_code >= 500]
    return codes, errors


@pytest.mark.acceptance
def test_concurrent_submits_and_polls_never_lock_the_database(
    server_factory: ServerFactory,
) -> None:
    server = server_factory(sim_lanes=4, max_queued=10_000)
    server.start()
    codes, errors = asyncio.run(_burst(server.url))
    assert errors == []
    assert codes == {202: REQUESTS // 2, 200: REQUESTS // 2}, codes
    log = server.stderr()
    assert "database is locked" not in log
    assert "Traceback" not in log, log[-3000:]


async def _same_key(url: str, key: str, count: int) -> list[httpx.Response]:
    body = sim_inference("idem.jpg", sim_seconds=0)
    limits = httpx.Limits(max_connections=count)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        return list(
            await asyncio.gather(
                *(
                    client.post("/v1/jobs", json=body, headers={"Idempotency-Key": key})
                    for _ in range(count)
                )
            )
        )


@pytest.mark.acceptance
def test_concurrent_submits_with_one_idempotency_key_make_one_job(
    server_factory: ServerFactory,
) -> None:
    server = server_factory()
    server.start()
    responses = asyncio.run(_same_key(server.url, "proof-key-1", 50))
    assert [r.status_code for r in responses] == [202] * 50, [r.text for r in responses]
    ids = {r.json()["id"] for r in responses}
    assert len(ids) == 1, ids
    replayed = Counter(r.headers.get("Idempotent-Replayed") for r in responses)
    assert replayed == {None: 1, "true": 49}, replayed
    with server.client() as client:
        jobs: list[dict[str, Any]] = list_all_jobs(client)
    assert [job["id"] for job in jobs] == list(ids)
    assert "database is locked" not in server.stderr()
