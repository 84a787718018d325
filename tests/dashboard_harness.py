"""What the dashboard's browser tests share: one real `yolo-orch serve` (simulated runtime,
tokens on), one Chromium, a fresh profile per test whose requests off loopback are aborted and
counted, and the screenshot check (both widths, none one colour)."""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from PIL import Image, ImageChops
from playwright.sync_api import Browser, BrowserContext, Page, Route, sync_playwright

from tests.support.browser import LOOPBACK, NETWORK_CUT, NETWORK_SCHEMES, find_chromium
from yolo_orch import testing
from yolo_orch.testing import Server

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"
ADMIN_TOKEN = "dashboard-admin-token"
JOBS_TOKEN = "dashboard-jobs-token"
WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}
TIMEOUT_MS = 20_000
IMAGE_COLOUR = (40, 160, 90)
IMAGE_NAME = "street.png"  # the simulated runtime finds two things in an image of this name


class Network:
    """Every request the pages make, and those aborted for leaving loopback."""

    def __init__(self) -> None:
        self.requested: list[str] = []
        self.aborted: list[str] = []

    def only_loopback(self, route: Route) -> None:
        parts = urlsplit(route.request.url)
        if parts.scheme not in NETWORK_SCHEMES or parts.hostname in LOOPBACK:
            route.continue_()
        else:
            self.aborted.append(route.request.url)
            route.abort("internetdisconnected")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("dashboard")
    tokens = [
        {"sha256": hashlib.sha256(ADMIN_TOKEN.encode()).hexdigest(), "scope": "admin"},
        {"sha256": hashlib.sha256(JOBS_TOKEN.encode()).hexdigest(), "scope": "jobs"},
    ]
    server = Server(tmp / "data", tmp / "logs", "dashboard", tokens=json.dumps(tokens))
    try:
        server.start()
        yield server
    finally:
        server.cleanup()


@pytest.fixture(scope="module")
def api(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=10
    ) as client:
        yield client


@pytest.fixture(scope="module")
def network() -> Network:
    return Network()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium, args=NETWORK_CUT, timeout=TIMEOUT_MS
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def context(browser: Browser, network: Network) -> Iterator[BrowserContext]:
    """A fresh browser profile (its own sessionStorage) whose traffic stays on loopback."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    context.route("**/*", network.only_loopback)
    context.on("request", lambda request: network.requested.append(request.url))
    try:
        yield context
    finally:
        context.close()


def signed_in(context: BrowserContext, server: Server, token: str = ADMIN_TOKEN) -> Page:
    page = context.new_page()
    page.goto(f"{server.url}/")
    page.fill("#token-input", token)
    page.click("#token-form button[type=submit]")
    page.wait_for_selector("#live[data-state=live]")
    return page


def submit(api: httpx.Client, **job: Any) -> str:
    response = api.post("/v1/jobs", json=job)
    assert response.status_code == 202, response.text
    job_id: str = response.json()["id"]
    return job_id


def wait_terminal(api: httpx.Client, job_id: str) -> dict[str, Any]:
    return testing.wait_terminal(api, job_id, timeout=20)


def answering(body: dict[str, Any]) -> Callable[[Route], None]:
    def fulfil(route: Route) -> None:
        route.fulfill(json=body)

    return fulfil


def png(colour: tuple[int, int, int] = IMAGE_COLOUR) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (640, 480), colour).save(out, format="PNG")
    return out.getvalue()


def screenshot(page: Page, view: str) -> None:
    """Both widths, each checked against a one-colour image of its size."""
    ARTIFACTS.mkdir(exist_ok=True)
    for width_name, (width, height) in WIDTHS.items():
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(150)  # a frame for the layout to follow the width
        data = page.screenshot(full_page=True)
        (ARTIFACTS / f"dashboard-{view}-{width_name}.png").write_bytes(data)
        image = Image.open(io.BytesIO(data)).convert("RGB")
        blank = Image.new("RGB", image.size, image.getpixel((0, 0)))
        assert ImageChops.difference(image, blank).getbbox() is not None, f"{view} is blank"
    page.set_viewport_size({"width": 1280, "height": 900})
