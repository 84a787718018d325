"""Overload: 10 x max_queued submissions at once. The excess is refused with 429 and a usable
Retry-After, the server's memory stays bounded, /healthz keeps answering, and every accepted
job completes."""

from __future__ import annotations

import pytest

from tests.support.servers import ServerFactory
from yolo_orch.testing.overload import run_overload

MAX_QUEUED = 50
RSS_GROWTH_BOUND_KIB = 128 * 1024  # generous: the burst itself is ~500 small requests


@pytest.mark.acceptance
def test_a_burst_ten_times_the_queue_is_refused_cleanly(server_factory: ServerFactory) -> None:
    server = server_factory(sim_lanes=2, max_queued=MAX_QUEUED)
    server.start()
    report = run_overload(server.url, server.pid, submissions=10 * MAX_QUEUED, clients=32)

    assert set(report.codes) <= {202, 429}, report.codes
    assert report.codes[429] > 0, "the burst never filled the queue"
    assert report.codes[202] >= MAX_QUEUED, report.codes
    assert report.codes[202] + report.codes[429] == 10 * MAX_QUEUED
    for value in report.retry_after:
        assert value.isdigit(), f"Retry-After {value!r} is not an integer number of seconds"
        assert int(value) >= 1

    assert report.health_ms, "no /healthz probe ran during the burst"
    assert report.health_failures == 0

    growth = max(report.rss_peak_kib, report.rss_after_kib) - report.rss_before_kib
    assert growth < RSS_GROWTH_BOUND_KIB, f"RSS grew by {growth} KiB"

    assert report.final_states == {"succeeded": len(report.accepted)}, report.final_states
    assert server.running
    assert "Traceback" not in server.stderr()
