"""Checks on the API's answers that many test modules share: problem documents, job states."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import httpx

PROBLEM = "application/problem+json"


def assert_problem(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["code"] == code
    assert body["type"] == f"urn:yolo-orch:problem:{code}"
    assert body["title"]
    assert body["detail"]
    return body


async def wait_state(client: httpx.AsyncClient, job_id: str, state: str) -> None:
    async with asyncio.timeout(10):
        while (await client.get(f"/v1/jobs/{job_id}")).json()["state"] != state:
            await asyncio.sleep(0.01)


def assert_no_server_path(text: str, tmp_path: Path) -> None:
    for form in {str(tmp_path), os.path.realpath(tmp_path)}:
        assert form not in text, text
