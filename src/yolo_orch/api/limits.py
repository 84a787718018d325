"""Request body limits on every route: small for JSON, larger for the upload routes. A body over
its limit gets 413 as soon as its Content-Length (or the bytes read so far) says so, before the
rest is read."""

from __future__ import annotations

from collections.abc import Collection

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from yolo_orch.api.problems import problem_response


class BodyTooLargeError(HTTPException):
    """Raised while the body is read; an HTTPException so FastAPI passes it to the problem
    handlers instead of calling it a parse error."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than the {limit} bytes allowed")


class BodyLimits:
    def __init__(
        self,
        app: ASGIApp,
        *,
        max_request_bytes: int,
        max_upload_bytes: int,
        upload_routes: Collection[tuple[str, str]],
    ) -> None:
        """`upload_routes`: (method, path) pairs; a `{name}` segment matches any one segment."""
        self._app = app
        self._default = max_request_bytes
        self._uploads = max_upload_bytes
        self._upload_routes = [
            (method, [None if part.startswith("{") else part for part in path.split("/")])
            for method, path in upload_routes
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        limit = self._uploads if self._is_upload(scope) else self._default
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            response = problem_response(
                413,
                "body_too_large",
                f"the request body ({declared} bytes) is larger than the {limit} bytes allowed",
                headers={"Connection": "close"},
            )
            await response(scope, receive, send)
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLargeError(limit)
            return message

        await self._app(scope, limited_receive, send)

    def _is_upload(self, scope: Scope) -> bool:
        parts = scope["path"].rstrip("/").split("/")
        return any(
            method == scope["method"]
            and len(pattern) == len(parts)
            and all(want is None or want == part for want, part in zip(pattern, parts, strict=True))
            for method, pattern in self._upload_routes
        )


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
