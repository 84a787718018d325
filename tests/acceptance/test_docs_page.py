"""The API pages work without internet: they name no other host, and a real browser whose network
is cut off (loopback aside) renders every operation.

The browser test drives the system's headless Chromium with Playwright (`executable_path`: no
browser download). Every request the pages make to a host other than loopback is aborted and
counted, and screenshots go to `test-artifacts/`. Without Chromium (Debian: `apt-get install
chromium`) it is skipped; `$CHROMIUM` names another binary.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.sync_api import Page, Route, sync_playwright

from tests.support.browser import LOOPBACK, NETWORK_CUT, NETWORK_SCHEMES, find_chromium
from yolo_orch.testing import Server

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = ROOT / "test-artifacts" / "docs-page.png"
REDOC_SCREENSHOT = ROOT / "test-artifacts" / "redoc-page.png"

EXPECTED_PATHS = {"/v1/jobs", "/v1/jobs/{job_id}", "/v1/models", "/v1/devices", "/healthz"}
ASSET_TYPES = {".js": "javascript", ".css": "text/css", ".png": "image/png"}
EXTERNAL_URL = re.compile(r"(?:https?:)?//[\w.-]+", re.IGNORECASE)
REFERENCED = re.compile(r"""(?:src|href|spec-url)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)

TIMEOUT_MS = 30_000


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
async def test_page_names_no_other_host(client: httpx.AsyncClient, page: str) -> None:
    response = await client.get(page)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    html = response.text
    assert EXTERNAL_URL.findall(html) == [], f"{page} names another host"

    referenced = set(REFERENCED.findall(html)) | set(re.findall(r"url: '([^']+)'", html))
    assert "/openapi.json" in referenced
    assets = referenced - {"/openapi.json"}
    assert assets, f"{page} loads no script"
    for url in sorted(referenced):
        assert url.startswith("/"), url
        asset = await client.get(url)
        assert asset.status_code == 200, url
        assert asset.content, url
        kind = ASSET_TYPES.get(Path(url).suffix, "json")
        assert kind in asset.headers["content-type"], (url, asset.headers["content-type"])


async def test_swagger_ui_badge_and_default_pages_are_off(client: httpx.AsyncClient) -> None:
    html = (await client.get("/docs")).text
    assert '"validatorUrl": null' in html  # the badge would load an image from swagger.io
    assert (await client.get("/docs/assets/missing.js")).status_code == 404
    assert (await client.get("/docs/oauth2-redirect")).status_code == 404


async def test_every_schema_reference_resolves(client: httpx.AsyncClient) -> None:
    """Redoc refuses to render a document with a dangling `$ref` (Swagger UI shows the rest)."""
    document = (await client.get("/openapi.json")).json()
    refs = set(re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', json.dumps(document)))
    assert refs, "the document has no references: the check checks nothing"
    missing = refs - set(document["components"]["schemas"])
    assert not missing, f"references to schemas the document lacks: {sorted(missing)}"


@pytest.mark.acceptance
def test_pages_render_in_a_browser_without_network(tmp_path: Path) -> None:
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium)")
    server = Server(tmp_path / "data", tmp_path / "logs", "docs")
    requested: list[str] = []
    aborted: list[str] = []

    def only_loopback(route: Route) -> None:
        url = route.request.url
        parts = urlsplit(url)
        if parts.scheme not in NETWORK_SCHEMES or parts.hostname in LOOPBACK:
            route.continue_()
        else:
            aborted.append(url)
            route.abort("internetdisconnected")

    try:
        server.start()
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=chromium, args=NETWORK_CUT, timeout=TIMEOUT_MS
            )
            try:
                page = browser.new_page(viewport={"width": 1280, "height": 2000})
                page.set_default_timeout(TIMEOUT_MS)
                page.route("**/*", only_loopback)
                page.on("request", lambda request: requested.append(request.url))

                page.goto(f"{server.url}/docs")
                paths = _wait_for(
                    page,
                    "Array.from(document.querySelectorAll('.opblock-summary-path'))"
                    ".map(e => e.getAttribute('data-path'))",
                )
                assert set(paths) >= EXPECTED_PATHS, paths
                assert page.locator(".errors-wrapper").count() == 0
                SCREENSHOT.parent.mkdir(exist_ok=True)
                page.screenshot(path=SCREENSHOT)

                page.set_viewport_size({"width": 1280, "height": 1200})
                page.goto(f"{server.url}/redoc")
                page.wait_for_function(
                    "() => document.querySelector('.api-content') "
                    "&& document.body.innerText.includes('/v1/jobs')"
                )
                assert "Lanes, their jobs and loaded models" in page.inner_text("body")
                page.screenshot(path=REDOC_SCREENSHOT)
            finally:
                browser.close()

        origin = urlsplit(server.url).netloc
        assert any(urlsplit(url).netloc == origin for url in requested)
        assert aborted == [], f"the pages asked other hosts: {aborted}"
    finally:
        server.cleanup()


def _wait_for(page: Page, expression: str) -> list[str]:
    """The value of `expression` once it is not empty. (A function, not an expression: the
    pages' content security policy forbids evaluating strings.)"""
    handle = page.wait_for_function(f"() => {{ const v = {expression}; return v.length && v }}")
    value: list[str] = handle.json_value()
    return value
