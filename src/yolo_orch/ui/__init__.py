"""The dashboard: one page at `/` and `/ui`, and its static files, all shipped in the package.

The page is plain HTML, CSS and JavaScript modules (no build step); the libraries it uses are
committed under `static/vendor/` with their licences. It holds no data: everything it shows it
reads from the public API (and `GET /v1/events`) with the token its user types in, so the page
and its files are served without a token.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

UI_ASSETS_URL = "/ui/static"
UI_PATHS = frozenset({"/", "/ui"})
STATIC_DIR = Path(__file__).parent / "static"
PAGE = STATIC_DIR / "index.html"

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",  # uPlot sizes its parts with style attributes
        "img-src 'self' data: blob:",
        "media-src 'self' blob:",  # a video job's annotated video, fetched with the token
        "connect-src 'self'",
        "frame-ancestors 'none'",
        "form-action 'none'",
        "base-uri 'none'",
    )
)
"""The page loads and asks nothing outside this server."""


def install_ui(app: FastAPI) -> None:
    """Add the page and its files to `app`; `RuntimeError` at once when they are missing."""
    if not PAGE.is_file():
        raise RuntimeError(f"the dashboard's files are missing from {STATIC_DIR}")
    app.mount(UI_ASSETS_URL, StaticFiles(directory=STATIC_DIR), name="ui-assets")
    template = PAGE.read_text(encoding="utf-8")

    async def dashboard(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        page = HTMLResponse(template.replace("{{root}}", root))
        page.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
        page.headers["Referrer-Policy"] = "no-referrer"
        page.headers["X-Content-Type-Options"] = "nosniff"
        page.headers["Cache-Control"] = "no-cache"
        return page

    for path in sorted(UI_PATHS):
        app.add_api_route(path, dashboard, methods=["GET"], include_in_schema=False)
