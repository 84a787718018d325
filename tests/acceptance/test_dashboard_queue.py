"""The queue (GET /v1/queue) and its view, against a real `yolo-orch serve` on the simulated
runtime with two lanes (the harness: tests/dashboard_harness.py): the order listed is the order
the dispatcher starts jobs in, and a queued job's page shows its place."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import BrowserContext

from tests.dashboard_harness import (
    api,
    browser,
    context,
    network,
    screenshot,
    server,
    signed_in,
    submit,
)
from yolo_orch.testing import Server

pytestmark = pytest.mark.acceptance
__all__ = ["api", "browser", "context", "network", "server"]  # the fixtures this module uses

LONG = {"sim_seconds": 120, "sim_steps": 240}  # stops within half a second of a cancel


def started(api: httpx.Client, job_id: str) -> bool:
    return api.get(f"/v1/jobs/{job_id}").json()["state"] != "queued"


@pytest.fixture
def busy_lanes(api: httpx.Client) -> Iterator[list[str]]:
    """Both lanes taken by long jobs: what is submitted next waits."""
    holders = [
        submit(api, kind="inference", model="sim", inputs=[f"h{n}.jpg"], params=LONG)
        for n in range(2)
    ]
    deadline = time.monotonic() + 10  # the last test's jobs may still be stopping
    while not all(started(api, job_id) for job_id in holders) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(started(api, job_id) for job_id in holders)
    yield holders
    for job_id in holders:
        api.post(f"/v1/jobs/{job_id}/cancel")


def test_the_queue_lists_jobs_in_the_order_they_start(
    api: httpx.Client, busy_lanes: list[str]
) -> None:
    def queued(priority: int) -> str:
        return submit(
            api, kind="inference", model="sim", inputs=["q.jpg"], priority=priority, params=LONG
        )

    low, high, low_later, lowest = queued(0), queued(5), queued(0), queued(-3)
    queue = api.get("/v1/queue").json()
    order = [entry["job"]["id"] for entry in queue["jobs"]]
    assert order == [high, low, low_later, lowest]
    assert [entry["position"] for entry in queue["jobs"]] == [1, 2, 3, 4]
    assert [entry["effective_priority"] for entry in queue["jobs"]] == [5, 0, 0, -3]
    waits = [entry["expected_wait_s"] for entry in queue["jobs"]]
    assert waits == sorted(waits)
    assert queue["queued"] == 4

    # A lane frees: the job listed first is the one that starts, and the rest move up.
    api.post(f"/v1/jobs/{busy_lanes[0]}/cancel")
    deadline = time.monotonic() + 10
    while not started(api, high) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started(api, high)
    assert not any(started(api, job_id) for job_id in (low, low_later, lowest))
    after = [entry["job"]["id"] for entry in api.get("/v1/queue").json()["jobs"]]
    assert after == [low, low_later, lowest]
    for job_id in (high, low, low_later, lowest):
        api.post(f"/v1/jobs/{job_id}/cancel")


def test_the_queue_view_and_a_queued_jobs_place(
    context: BrowserContext, server: Server, api: httpx.Client, busy_lanes: list[str]
) -> None:
    first = submit(api, kind="training", model="sim", priority=1, params=LONG)
    second = submit(api, kind="inference", model="sim", inputs=["a.jpg"], params=LONG)
    third = submit(api, kind="inference", model="sim", inputs=["b.jpg"], params=LONG)
    page = signed_in(context, server)
    page.goto(f"{server.url}/#/queue")
    page.wait_for_selector(f"tr[data-job='{third}']")
    rows = page.eval_on_selector_all("tr[data-job]", "rows => rows.map(r => r.dataset.job)")
    assert rows == [first, second, third]
    assert page.inner_text(f"tr[data-job='{first}'] .effective") == "1"
    assert page.inner_text("#queue-summary").startswith("3 queued")
    screenshot(page, "queue")

    page.goto(f"{server.url}/#/jobs/{third}")
    page.wait_for_selector("#queue-place[data-position='3']")
    assert "Position 3 of 3 queued" in page.inner_text("#queue-place")
    screenshot(page, "job-queued")
    api.post(f"/v1/jobs/{first}/cancel")  # the jobs before it leave: it moves up
    page.wait_for_selector("#queue-place[data-position='2']")
    for job_id in (second, third):
        api.post(f"/v1/jobs/{job_id}/cancel")
    page.wait_for_selector("#queue-place", state="hidden")
