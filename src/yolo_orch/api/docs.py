"""The API pages, `/docs` (Swagger UI) and `/redoc`, served without any CDN.

GPU hosts often have no internet, so the JavaScript and CSS the pages load are served by this
server from files installed with the package: the `fastapi-offline` wheel ships the Swagger UI 5
and Redoc 2 bundles (its `static/` folder); only those files are used, not its app class. The
pages name no other host: no Google fonts, no Swagger validator badge, a local favicon. Redoc's
bundle still links its "Redocly" logo from its CDN; a Content-Security-Policy on both pages keeps
the browser from fetching that or anything else from another origin.

The app is created with `docs_url=None, redoc_url=None`; `install_docs` adds the pages.
"""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_URL = "/docs/assets"
ASSETS_DIR = Path(fastapi_offline.__file__).parent / "static"
ASSET_FILES = ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png")

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self' 'unsafe-inline'",  # FastAPI's page starts Swagger UI inline
        "style-src 'self' 'unsafe-inline'",  # both UIs set styles at run time
        "img-src 'self' data: blob:",
        "font-src 'self' data:",
        "worker-src 'self' blob:",  # Redoc's search runs in a worker
        "connect-src 'self'",
        "frame-ancestors 'self'",
        "form-action 'self'",
        "base-uri 'none'",
    )
)
"""The pages load and ask nothing outside this server, whatever their bundles link to."""

SWAGGER_UI_PARAMETERS = {
    "validatorUrl": None,  # the default badge loads an image from validator.swagger.io
    "tryItOutEnabled": True,
    "displayRequestDuration": True,
}


def install_docs(app: FastAPI, *, docs_url: str = "/docs", redoc_url: str = "/redoc") -> None:
    """Serve the bundled assets under `ASSETS_URL` and add the two pages to `app`.

    Raises `RuntimeError` at once when the installed assets are missing, rather than serving a
    blank page later."""
    missing = [name for name in ASSET_FILES if not (ASSETS_DIR / name).is_file()]
    if missing:
        raise RuntimeError(f"the API page assets are missing from {ASSETS_DIR}: {missing}")
    openapi_url = app.openapi_url
    if openapi_url is None:
        raise RuntimeError("the API pages need the app's openapi_url")
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS_DIR), name="docs-assets")
    parameters = {**SWAGGER_UI_PARAMETERS, **(app.swagger_ui_parameters or {})}

    @app.get(docs_url, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return _protected(
            get_swagger_ui_html(
                openapi_url=f"{root}{openapi_url}",
                title=f"{app.title} - API",
                swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
                swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
                swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
                swagger_ui_parameters=parameters,
            )
        )

    @app.get(redoc_url, include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return _protected(
            get_redoc_html(
                openapi_url=f"{root}{openapi_url}",
                title=f"{app.title} - ReDoc",
                redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
                redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
                with_google_fonts=False,
            )
        )


def _protected(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    page.headers["Referrer-Policy"] = "no-referrer"
    page.headers["X-Content-Type-Options"] = "nosniff"
    return page
