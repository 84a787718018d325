"""`Prefer: wait=N` (RFC 7240) on submissions and on GET /v1/jobs/{id}: the job is committed
first; the answer is 200 with the finished job when it ends in time, else the usual 202."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from tests.conftest import serve, sim_job
from yolo_orch.api.prefer import wait_seconds
from yolo_orch.app import create_app
from yolo_orch.config import Settings


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, None),
        ("wait=5", 5.0),
        ("respond-async, wait=2.5", 2.5),
        ('WAIT="3"', 3.0),
        ("wait=500", 60.0),  # capped by max_wait_s
        ("wait=0", None),
        ("wait=-1", None),
        ("wait=soon", None),
        ("wait=nan", None),
        ("return=minimal", None),
        ("wait=1; foo=bar", 1.0),
    ],
)
def test_the_wait_a_prefer_header_asks_for(header: str | None, expected: float | None) -> None:
    assert wait_seconds(header, max_wait_s=60.0) == expected


def test_max_wait_zero_turns_waiting_off() -> None:
    assert wait_seconds("wait=5", max_wait_s=0) is None


async def test_a_quick_job_comes_back_finished_with_200(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/jobs", json=sim_job(), headers={"Prefer": "wait=10"})

    assert response.status_code == 200, response.text
    assert response.headers["Preference-Applied"] == "wait=10"
    assert response.headers["Location"] == f"/v1/jobs/{response.json()['id']}"
    job = response.json()
    assert job["state"] == "succeeded"
    assert job["result"]["images"] == 2  # the summary comes with it


async def test_a_long_prefer_header_is_a_hint_too(client: httpx.AsyncClient) -> None:
    hints = "respond-async, " * 200 + "wait=10"
    response = await client.post("/v1/jobs", json=sim_job(), headers={"Prefer": hints})
    assert response.status_code == 200, response.text
    assert response.headers["Preference-Applied"] == "wait=10"


async def test_preferences_in_several_fields_are_one_list(client: httpx.AsyncClient) -> None:
    headers = [("Prefer", "respond-async"), ("Prefer", "wait=10")]
    response = await client.post("/v1/jobs", json=sim_job(), headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["Preference-Applied"] == "wait=10"


async def test_a_slow_job_is_still_202_after_the_wait(client: httpx.AsyncClient) -> None:
    slow = sim_job(params={"sim_seconds": 3.0})
    response = await client.post("/v1/jobs", json=slow, headers={"Prefer": "wait=0.2"})

    assert response.status_code == 202, response.text
    assert "Preference-Applied" not in response.headers
    assert response.json()["state"] in {"queued", "running"}


async def test_without_prefer_a_submission_answers_202_at_once(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/jobs", json=sim_job())

    assert response.status_code == 202
    assert response.json()["state"] == "queued"


async def test_an_upload_honours_prefer_wait(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/jobs/inference",
        data={"model": "sim", "params": '{"sim_seconds": 0.05}'},
        files=[("images", ("a.jpg", b"not really an image", "image/jpeg"))],
        headers={"Prefer": "wait=10"},
    )

    assert response.status_code == 200, response.text
    assert response.json()["state"] == "succeeded"


async def test_get_is_a_long_poll_with_prefer_wait(client: httpx.AsyncClient) -> None:
    submitted = await client.post("/v1/jobs", json=sim_job(params={"sim_seconds": 0.3}))
    job_id = submitted.json()["id"]

    response = await client.get(f"/v1/jobs/{job_id}", headers={"Prefer": "wait=10"})

    assert response.status_code == 200
    assert response.headers["Preference-Applied"] == "wait=10"
    assert response.json()["state"] == "succeeded"


async def test_a_long_poll_of_an_unknown_job_is_404(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/jobs/nope", headers={"Prefer": "wait=10"})

    assert response.status_code == 404


async def test_waiting_is_capped_by_max_wait_s(
    settings_factory: Callable[..., Settings],
) -> None:
    async with serve(create_app(settings_factory(max_wait_s=0.2))) as client:
        slow = sim_job(params={"sim_seconds": 3.0})
        response = await client.post("/v1/jobs", json=slow, headers={"Prefer": "wait=60"})

    assert response.status_code == 202
