"""Request body limits on every route: small for JSON, larger for the upload routes. A body over
its limit gets 413 as soon as its Content-Length (or the bytes read so far) says so, before the
rest is read."""

from __future__ import annotations

from collections.abc import Collection

from starlette.middleware.body_limit import RequestBodyLimitMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send


class BodyLimits:
    def __init__(
        self,
        app: ASGIApp,
        *,
        max_request_bytes: int,
        max_upload_bytes: int,
        upload_routes: Collection[tuple[str, str]],
    ) -> None:
        self._default = RequestBodyLimitMiddleware(app, max_request_bytes)
        self._uploads = RequestBodyLimitMiddleware(app, max_upload_bytes)
        self._upload_routes = frozenset(upload_routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = (scope.get("method", ""), scope.get("path", "").rstrip("/"))
        limited = self._uploads if route in self._upload_routes else self._default
        await limited(scope, receive, send)
