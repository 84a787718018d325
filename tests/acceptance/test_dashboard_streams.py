"""Stream jobs on the dashboard, in a real browser (the harness: tests/dashboard_harness.py):
a real `yolo-orch serve` on the simulated runtime reads a video under its data roots as a live
source, and the overview shows the stream's card (health, fps, latency, line counts, snapshot)
from the events it already follows, until the stream is cancelled. A second test hands the page
what the API answers for streams in trouble (a source reconnecting, one lost, lanes with stream
shares), which a video on loopback does not go through on cue.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import BrowserContext, Page, Route

from tests.dashboard_harness import (
    ADMIN_TOKEN,
    Network,
    answering,
    browser,
    context,
    network,
    screenshot,
    signed_in,
    submit,
)
from yolo_orch.testing import Server, wait_for
from yolo_orch.testing.video import make_video

pytestmark = pytest.mark.acceptance
__all__ = ["browser", "context", "network"]  # the harness's fixtures this module uses

STREAM = {
    "kind": "stream",
    "model": "sim",
    "sources": ["clip.mp4"],
    "params": {
        "max_fps": 5,
        "track": "bytetrack",
        "lines": [{"name": "mid", "start": [0.5, 0], "end": [0.5, 1]}],
        "snapshot_every_s": 1,
    },
}
SCREENSHOT = Path("/tmp/dashboard-streams.png")


@pytest.fixture(scope="module")
def stream_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("dashboard-streams")
    media = tmp / "media"
    media.mkdir()
    make_video(media / "clip.mp4", frames=30, size=(320, 240))
    tokens = [{"sha256": hashlib.sha256(ADMIN_TOKEN.encode()).hexdigest(), "scope": "admin"}]
    server = Server(
        tmp / "data",
        tmp / "logs",
        "dashboard-streams",
        tokens=json.dumps(tokens),
        data_roots=[media],
    )
    try:
        server.start()
        yield server
    finally:
        server.cleanup()


@pytest.fixture(scope="module")
def stream_api(stream_server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=stream_server.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=10
    ) as client:
        yield client


def figure(page: Page, card: str, name: str) -> str:
    return page.inner_text(f"{card} [data-figure={name}] .tile-value")


def test_a_running_stream_shows_live_on_the_overview_until_cancelled(
    context: BrowserContext, stream_server: Server, stream_api: httpx.Client, network: Network
) -> None:
    page = signed_in(context, stream_server)
    page.wait_for_selector("#streams")
    job_id = submit(stream_api, **STREAM)
    card = f"[data-stream='{job_id}']"
    page.wait_for_selector(f"{card}[data-health=live]")  # from the event stream: no reload
    assert "live" in page.inner_text(f"{card} .stream-badges")
    assert page.inner_text(f"{card} tr[data-source] .source-name") == "clip.mp4"
    # fps in and out, as "in / out", once the stream has been read for a second or so.
    page.wait_for_function(
        """(card) => {
            const value = document.querySelector(`${card} [data-figure=fps] .tile-value`);
            return value && value.textContent.split(' / ').every((part) => Number(part) > 0);
        }""",
        arg=card,
    )
    p50, p99 = figure(page, card, "latency").split(" / ")
    assert 0 <= float(p50) <= float(p99)
    assert figure(page, card, "dropped").isdigit()
    assert figure(page, card, "reconnects") == "0"
    # Its lane lists it, with the fps it asked for (max_fps times its one source).
    page.wait_for_selector(f"[data-lane] [data-lane-stream='{job_id}']")
    assert "of 5.0 fps" in page.inner_text(f"[data-lane-stream='{job_id}']")

    # The simulated person crosses the frame every 4 s: the line counts it, per class.
    crossed = f"{card} tr[data-count='line:mid'][data-class=person]"
    page.wait_for_selector(crossed, timeout=15_000)
    in_out = [page.inner_text(f"{crossed} td[data-key={key}]") for key in ("in", "out")]
    assert sum(int(n) for n in in_out) >= 1, in_out

    # The snapshot: hidden until a frame decoded, then a real image (never a broken one).
    wait_for(
        lambda: stream_api.get(f"/v1/jobs/{job_id}/snapshot.jpg").status_code == 200 or None,
        15,
        "the stream's first snapshot (GET /v1/jobs/{id}/snapshot.jpg)",
    )
    page.wait_for_selector(f"{card} figure[data-snapshot=shown] img.snapshot", timeout=15_000)
    assert page.eval_on_selector(f"{card} img.snapshot", "img => img.naturalWidth") == 320
    page.screenshot(path=str(SCREENSHOT), full_page=True)
    screenshot(page, "streams")

    page.click(f"{card} button.cancel")
    page.wait_for_selector(f"{card}[data-health=ended]")
    assert "cancelled" in page.inner_text(f"{card} .stream-badges")
    assert page.locator(f"{card} button.cancel").count() == 0
    assert stream_api.get(f"/v1/jobs/{job_id}").json()["state"] == "cancelled"

    # The job's own page shows the same card, with its last counts.
    page.goto(f"{stream_server.url}/#/jobs/{job_id}")
    page.wait_for_selector(f"{card}[data-health=ended] tr[data-count='line:mid']")
    assert "clip.mp4" in page.inner_text(".facts")  # its sources, among its parameters
    assert network.aborted == [], f"the dashboard asked other hosts: {network.aborted}"


def stream_job(job_id: str) -> dict[str, Any]:
    """A running stream as GET /v1/jobs answers it: its second camera reconnecting, its third
    lost, counts in a zone and on a line."""
    sources = [
        {"source": "rtsp://***@cam-a.lan/live", "health": "live", "fps_in": 5, "fps_out": 5},
        {"source": "rtsp://***@cam-b.lan/live", "health": "reconnecting", "fps_in": 0},
        {"source": "rtsp://***@cam-c.lan/live", "health": "source_lost", "fps_in": 0},
    ]
    for source in sources:
        source.update(frames_read=120, frames_processed=100, frames_dropped=7, reconnects=2)
        source.setdefault("fps_out", 0)
    counts = [
        {
            "source": source["source"],
            "zones": {"door": {"inside": {"person": 2}, "in": {"person": 5}, "out": {"car": 1}}},
            "lines": {"gate": {"in": {"car": 3}, "out": {}}},
        }
        for source in sources
    ]
    return {
        "id": job_id,
        "kind": "stream",
        "state": "running",
        "model": "yolo11n",
        "sources": [source["source"] for source in sources],
        "params": {
            "snapshot_every_s": 1,
            "zones": [{"name": "door", "points": [[0, 0], [1, 0], [1, 1]]}],
            "lines": [{"name": "gate", "start": [0, 0.5], "end": [1, 0.5]}],
        },
        "cancel_requested": False,
        "progress": {
            "done": 300,
            "total": 0,
            "unit": "frames",
            "detail": {
                "health": "source_lost",
                "fps_in": 5,
                "fps_out": 5,
                "latency_ms": {"p50": 41.5, "p99": 180.25},
                "sources": sources,
                "counts": counts,
            },
        },
    }


def test_streams_in_trouble_and_lane_shares_read_plainly(
    context: BrowserContext, stream_server: Server
) -> None:
    job_id = "5f0c2a4e-1111-4222-8333-944455556666"
    lane = {
        "id": "sim:0",
        "device_name": None,
        "slots": 1,
        "busy": 0,
        "jobs": [],
        "models": [],
        "healthy": True,
        "wedged": False,
        "memory_used_bytes": None,
        "memory_total_bytes": None,
        "stream_slots": 8,
        "stream_fps": 1000.0,
        "streams": [{"job_id": job_id, "fps_asked": 15.0, "fps_out": 4.5}],
    }
    snapshots: list[str] = []

    def no_snapshot_or_a_broken_one(route: Route) -> None:
        snapshots.append(route.request.url)
        if len(snapshots) == 1:
            route.fulfill(status=404, json={"code": "snapshot_not_found"})
        else:
            route.fulfill(status=200, content_type="image/jpeg", body=b"not a jpeg")

    page = context.new_page()
    page.route(
        lambda url: "/v1/jobs?" in url and "kind=stream" in url,
        answering({"jobs": [stream_job(job_id)], "next_cursor": None}),
    )
    page.route(
        f"{stream_server.url}/v1/devices", answering({"runtime": "simulated", "devices": [lane]})
    )
    page.route(f"**/v1/jobs/{job_id}/snapshot.jpg*", no_snapshot_or_a_broken_one)
    page.goto(f"{stream_server.url}/")
    page.fill("#token-input", ADMIN_TOKEN)
    page.click("#token-form button[type=submit]")
    card = f"[data-stream='{job_id}']"
    page.wait_for_selector(f"{card}[data-health=source_lost]")

    healths = page.eval_on_selector_all(
        f"{card} tr[data-source] [data-health]", "els => els.map((e) => e.textContent.trim())"
    )
    assert healths == ["● live", "↻ reconnecting", "✗ source lost"]
    styles = page.eval_on_selector_all(
        f"{card} tr[data-source] [data-health]",
        "els => els.map((e) => { const s = getComputedStyle(e); "
        "return [s.borderStyle, s.backgroundColor].join(' '); })",
    )
    assert len(set(styles)) == 3, styles  # each looks different, not by its text alone
    shown = page.eval_on_selector_all(
        f"{card} .source-name", "els => els.map((e) => e.textContent)"
    )
    assert shown == [f"rtsp://***@cam-{c}.lan/live" for c in "abc"]  # as the API gave them
    assert figure(page, card, "latency") == "41.5 / 180.3"
    assert figure(page, card, "dropped") == "21"
    assert figure(page, card, "reconnects") == "6"
    door = f"{card} tr[data-count='zone:door']"
    assert page.locator(door).count() == 6  # car and person, for each of the three sources
    person = f"{door}[data-class=person] td[data-key]"
    inside_in_out = ["2", "5", "0"]
    assert page.eval_on_selector_all(person, "els => els.map((e) => e.textContent)") == 3 * [
        *inside_in_out
    ]
    gate = f"{card} tr[data-count='line:gate'][data-class=car] td[data-key]"
    assert page.eval_on_selector_all(gate, "els => els.map((e) => e.textContent)")[:3] == [
        "\N{EN DASH}",  # a line has nothing inside
        "3",
        "0",
    ]

    stream_in_lane = f"[data-lane='sim:0'] [data-lane-stream='{job_id}']"
    page.wait_for_selector(stream_in_lane)
    assert "4.5 of 15.0 fps" in page.inner_text(stream_in_lane)
    assert "Streams: 1/8" in page.inner_text("[data-lane='sim:0']")

    # No snapshot yet (404), then a body that is no image: nothing broken is ever shown.
    page.wait_for_selector(f"{card} figcaption:has-text('could not be read')")
    assert len(snapshots) >= 2
    assert page.get_attribute(f"{card} figure", "data-snapshot") == "none"
    assert page.is_hidden(f"{card} img.snapshot")
    assert all("?t=" in url for url in snapshots)  # each asked past any cache
    page.set_viewport_size({"width": 390, "height": 844})
    # At a phone's width the wide tables scroll inside the card; the page does not widen.
    page.wait_for_function("() => document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(page, "streams-trouble")
    page.emulate_media(color_scheme="dark")
    screenshot(page, "streams-trouble-dark")
