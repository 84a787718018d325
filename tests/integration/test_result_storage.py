"""Where a job's result is kept: a small one in the database, committed with the job's outcome;
a larger one in its result file. Both read the same through the API."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.conftest import serve, sim_job, wait_terminal
from yolo_orch.app import create_app
from yolo_orch.config import Settings

INPUTS = [f"img-{n}.jpg" for n in range(6)]


async def _result(client: httpx.AsyncClient, job_id: str) -> tuple[Any, Any]:
    whole = (await client.get(f"/v1/jobs/{job_id}/result")).json()
    page = (await client.get(f"/v1/jobs/{job_id}/result", params={"offset": 4})).json()
    return whole, page


@pytest.mark.parametrize("inline_result_bytes", [1 << 16, 0])
async def test_a_result_reads_the_same_wherever_it_is_kept(
    settings_factory: Callable[..., Settings], inline_result_bytes: int
) -> None:
    settings = settings_factory(inline_result_bytes=inline_result_bytes)
    async with serve(create_app(settings)) as client:
        body = sim_job(inputs=INPUTS, params={"sim_seconds": 0, "sim_steps": 1})
        job_id = (await client.post("/v1/jobs", json=body)).json()["id"]
        assert (await wait_terminal(client, job_id))["state"] == "succeeded"

        whole, page = await _result(client, job_id)

    assert [entry["source"] for entry in whole["images"]] == INPUTS
    assert page["images"] == whole["images"][4:]
    assert (page["total"], page["next_offset"]) == (6, None)
    in_file = (settings.jobs_dir / job_id / "result.json").is_file()
    assert in_file == (inline_result_bytes == 0)
