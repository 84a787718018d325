"""A headless Chromium kept on loopback, for the browser tests of the docs page and of the
dashboard."""

from __future__ import annotations

import os
import shutil

LOOPBACK = {"127.0.0.1", "localhost", "::1"}


NETWORK_SCHEMES = {"http", "https", "ws", "wss"}


NETWORK_CUT = [
    # Below the page's routes, for whatever the browser might send by itself: all proxied
    # traffic goes to a closed port (Chromium never proxies loopback), and no name but
    # 127.0.0.1 resolves. Playwright's own flags already turn background networking, component
    # updates and sync off (and the sandbox, which root in CI could not use).
    "--disable-quic",
    "--proxy-server=http://127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
]


def find_chromium() -> str | None:
    candidates = [os.environ.get("CHROMIUM", ""), "chromium", "chromium-browser", "google-chrome"]
    for name in filter(None, candidates):
        if path := shutil.which(name):
            return path
    return None
