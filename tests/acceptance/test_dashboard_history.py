"""What the server did over time (GET /v1/history) and the overview's charts of it, against a
real `yolo-orch serve` on the simulated runtime (the harness: tests/dashboard_harness.py)."""

from __future__ import annotations

import time

import httpx
import pytest
from playwright.sync_api import BrowserContext

from tests.dashboard_harness import (
    answering,
    api,
    browser,
    context,
    network,
    screenshot,
    server,
    signed_in,
    submit,
    wait_terminal,
)
from yolo_orch.testing import Server

pytestmark = pytest.mark.acceptance
__all__ = ["api", "browser", "context", "network", "server"]  # the fixtures this module uses


def test_the_history_moves_each_second_and_counts_the_jobs(api: httpx.Client) -> None:
    first = api.get("/v1/history").json()
    assert first["resolution"] == "1s"
    assert first["capacity"] == 900
    jobs = [
        submit(api, kind="inference", model="sim", inputs=[f"{n}.jpg"], params={"sim_seconds": 1.2})
        for n in range(3)
    ]
    for job_id in jobs:
        assert wait_terminal(api, job_id)["state"] == "succeeded"
    time.sleep(2.2)  # two ticks more: the last runs' ends are in a point
    second = api.get("/v1/history").json()
    assert len(second["points"]) >= len(first["points"]) + 2
    assert second["points"][-1]["at"] > (first["points"] or [{"at": 0}])[-1]["at"]
    points = second["points"]
    assert sum(p["started"] for p in points) >= 3
    assert sum(p["finished"] for p in points) >= 3
    runs = [p["latency_s"]["inference"] for p in points if "inference" in p["latency_s"]]
    assert sum(r["n"] for r in runs) >= 3
    assert all(r["p50"] <= r["p99"] for r in runs)
    assert any(p["utilisation_max"] for p in points)  # runs of 1.2 s: a tick saw a lane busy
    host = points[-1]["host"]
    assert set(host) == {"cpu_percent", "memory_percent", "disk_percent", "load_1m"}
    assert 0 < host["memory_percent"] < 100
    assert 0 < host["disk_percent"] <= 100
    minutes = api.get("/v1/history", params={"resolution": "1m"}).json()
    assert minutes["capacity"] == 1440
    assert minutes["points"]
    assert api.get("/v1/history", params={"resolution": "5s"}).status_code == 422


def test_the_overview_draws_the_history_and_it_moves(
    context: BrowserContext, server: Server, api: httpx.Client
) -> None:
    page = signed_in(context, server)
    page.wait_for_selector("#history[data-last]")
    charts = page.eval_on_selector_all("[data-chart]", "els => els.map(e => e.dataset.chart)")
    assert charts == ["jobs", "queue", "latency", "utilisation", "host"]
    assert page.locator("[data-chart] canvas").count() == 5
    last = page.get_attribute("#history", "data-last")
    submit(api, kind="inference", model="sim", inputs=["x.jpg"])
    page.wait_for_function(  # read again within 5 s, a few points later
        "last => document.getElementById('history').dataset.last !== last", arg=last, timeout=8000
    )
    assert float(page.get_attribute("#history", "data-last") or 0) > float(last or 0)
    screenshot(page, "overview-history")
    page.select_option("#history-resolution", "1m")
    page.wait_for_function("() => Number(document.getElementById('history').dataset.points) >= 1")


def test_on_a_cluster_each_node_is_a_series_of_the_node_charts(
    context: BrowserContext, server: Server, api: httpx.Client
) -> None:
    """The server's own history, with the nodes a Ray head's points carry added to it (a
    cluster is not started for a page's test: tests/on_ray reads the nodes' telemetry)."""
    history = api.get("/v1/history").json()
    for i, point in enumerate(history["points"]):
        point["nodes"] = {
            "gpu-a": {"load_1m": 1.0 + i, "memory_percent": 40.0, "gpu_percent": 90.0},
            "gpu-b": {"load_1m": 0.5, "memory_percent": None, "gpu_percent": None},
        }
    page = signed_in(context, server)
    page.route("**/v1/history?resolution=1s", answering(history))
    # The next read (within 5 s) brings the nodes: their charts are added.
    page.wait_for_selector("[data-chart='nodes-gpu_percent'] canvas", timeout=10_000)
    charts = page.eval_on_selector_all("[data-chart]", "els => els.map(e => e.dataset.chart)")
    assert charts[-3:] == ["nodes-load_1m", "nodes-memory_percent", "nodes-gpu_percent"]
    labels = page.eval_on_selector_all(
        "[data-chart='nodes-load_1m'] .u-legend .u-label", "els => els.map(e => e.textContent)"
    )
    assert labels[1:] == ["gpu-a", "gpu-b"]  # after the time axis's
    screenshot(page, "overview-nodes")
