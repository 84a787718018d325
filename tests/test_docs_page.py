"""The API pages work without internet: they name no other host, and a real browser whose network
is cut off (loopback aside) renders every operation.

The browser test drives headless Chromium over the DevTools protocol on a pipe
(`--remote-debugging-pipe`: file descriptors 3 and 4, NUL-terminated JSON), so it needs no
websocket client, no driver and no open port. It records every request the pages make, and saves
a screenshot to `test-artifacts/docs-page.png`. Without Chromium (Debian: `apt-get install
chromium`) it is skipped; `$CHROMIUM` names another binary.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import itertools
import json
import os
import re
import select
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.acceptance.conftest import Server

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOT = ROOT / "test-artifacts" / "docs-page.png"
REDOC_SCREENSHOT = ROOT / "test-artifacts" / "redoc-page.png"

EXPECTED_PATHS = {"/v1/jobs", "/v1/jobs/{job_id}", "/v1/models", "/v1/devices", "/healthz"}
ASSET_TYPES = {".js": "javascript", ".css": "text/css", ".png": "image/png"}
EXTERNAL_URL = re.compile(r"(?:https?:)?//[\w.-]+", re.IGNORECASE)
REFERENCED = re.compile(r"""(?:src|href|spec-url)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)


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
    chromium = _find_chromium()
    if chromium is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium)")
    server = Server(tmp_path / "data", tmp_path / "logs", "docs")
    try:
        server.start()
        with Browser(chromium, tmp_path / "profile") as browser:
            requests = browser.record_requests()

            browser.open(f"{server.url}/docs", width=1280, height=2000)
            paths = browser.wait_for(
                "Array.from(document.querySelectorAll('.opblock-summary-path'))"
                ".map(e => e.getAttribute('data-path'))",
                lambda value: bool(value),
                what="Swagger UI to list the operations",
            )
            assert set(paths) >= EXPECTED_PATHS, paths
            assert browser.evaluate("document.querySelectorAll('.errors-wrapper').length") == 0
            SCREENSHOT.parent.mkdir(exist_ok=True)
            SCREENSHOT.write_bytes(browser.screenshot())

            browser.open(f"{server.url}/redoc", width=1280, height=1200)
            redoc_text = browser.wait_for(
                "document.querySelector('.api-content') ? document.body.innerText : ''",
                lambda value: "/v1/jobs" in value,
                what="Redoc to render the operations",
            )
            assert "Lanes, their jobs and loaded models" in redoc_text
            REDOC_SCREENSHOT.write_bytes(browser.screenshot())

        origin = urlsplit(server.url).netloc
        assert any(urlsplit(url).netloc == origin for url in requests.urls.values())
        escaped = {
            url
            for request_id, url in requests.urls.items()
            if urlsplit(url).scheme not in {"data", "blob"}
            and urlsplit(url).netloc != origin
            and requests.blocked.get(request_id) != "csp"
        }
        assert not escaped, f"the pages asked other hosts, unblocked by their policy: {escaped}"
    finally:
        server.cleanup()


@dataclass
class Requests:
    urls: dict[str, str] = field(default_factory=dict)
    """Request id: URL."""
    blocked: dict[str, str] = field(default_factory=dict)
    """Request id: why the browser refused to send it ("csp", ...)."""

    def note(self, event: dict[str, Any]) -> None:
        params = event.get("params", {})
        if event.get("method") == "Network.requestWillBeSent":
            self.urls[params["requestId"]] = params["request"]["url"]
        elif event.get("method") == "Network.loadingFailed" and "blockedReason" in params:
            self.blocked[params["requestId"]] = params["blockedReason"]


def _high_pipe() -> tuple[int, int]:
    """A close-on-exec pipe whose ends are above 4, so that wiring them onto 3 and 4 in the
    child cannot overwrite one with the other."""
    ends = os.pipe()
    high = tuple(fcntl.fcntl(end, fcntl.F_DUPFD_CLOEXEC, 10) for end in ends)
    for end in ends:
        os.close(end)
    return high[0], high[1]


def _find_chromium() -> str | None:
    candidates = [os.environ.get("CHROMIUM", ""), "chromium", "chromium-browser", "google-chrome"]
    for name in filter(None, candidates):
        if path := shutil.which(name):
            return path
    return None


class Browser:
    """Headless Chromium driven over `--remote-debugging-pipe`, with every network path but
    loopback cut: all proxied traffic goes to a closed port (Chromium never proxies loopback) and
    no name but 127.0.0.1 resolves. Background services are off, so only the page talks."""

    TIMEOUT_S = 30.0

    def __init__(self, binary: str, profile: Path) -> None:
        self.argv = [
            binary,
            "--headless",
            "--no-sandbox",  # CI runs as root
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--disable-default-apps",
            "--disable-dev-shm-usage",
            "--proxy-server=http://127.0.0.1:9",
            "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
            f"--user-data-dir={profile}",
            "--remote-debugging-pipe",
            "about:blank",
        ]
        self._ids = itertools.count(1)
        self._buffer = b""
        self._events: list[dict[str, Any]] = []
        self._requests: Requests | None = None
        self._session = ""

    def __enter__(self) -> Browser:
        to_browser_r, self._to_browser = _high_pipe()
        self._from_browser, from_browser_w = _high_pipe()

        def wire_pipe() -> None:  # in the child: fd 3 reads commands, fd 4 writes replies
            os.dup2(to_browser_r, 3)  # dup2 clears close-on-exec on 3 and 4 only
            os.dup2(from_browser_w, 4)

        self._process = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=False,  # every other descriptor is close-on-exec already
            preexec_fn=wire_pipe,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        try:
            targets = self.call("Target.getTargets")["targetInfos"]
            page = next(t for t in targets if t["type"] == "page")
            attached = self.call("Target.attachToTarget", targetId=page["targetId"], flatten=True)
            self._session = attached["sessionId"]
            self.call("Page.enable")
            self.call("Network.enable")
        except BaseException:
            self._close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            self._session = ""
            self.call("Browser.close")
        self._close()

    def _close(self) -> None:
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(10)
        finally:
            os.close(self._to_browser)
            os.close(self._from_browser)

    def record_requests(self) -> Requests:
        """Every request the page makes from now on (filled as the test runs)."""
        self._requests = Requests()
        return self._requests

    def open(self, url: str, *, width: int, height: int) -> None:
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        navigation = self.call("Page.navigate", url=url)
        assert "errorText" not in navigation, navigation

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    def wait_for(self, expression: str, done: Any, *, what: str) -> Any:
        deadline = time.monotonic() + self.TIMEOUT_S
        while True:
            value = self.evaluate(expression)
            if done(value):
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {self.TIMEOUT_S}s waiting for {what}")
            time.sleep(0.1)

    def screenshot(self) -> bytes:
        return base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command (to the page once attached) and return its result."""
        message_id = next(self._ids)
        message: dict[str, Any] = {"id": message_id, "method": method, "params": params}
        if self._session:
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        for reply in self._messages():
            if reply.get("id") == message_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            if self._requests is not None:
                self._requests.note(reply)
        raise AssertionError("unreachable")

    def _messages(self) -> Iterator[dict[str, Any]]:
        deadline = time.monotonic() + self.TIMEOUT_S
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                yield json.loads(raw)
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise TimeoutError(f"Chromium did not answer within {self.TIMEOUT_S}s")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError(f"Chromium closed the pipe (exit {self._process.poll()})")
            self._buffer += chunk
