"""Request body limits on every route: small for JSON, larger for the upload routes. A body over
its limit gets 413 as soon as its Content-Length (or the bytes read so far) says so, without
passing the rest to the app.

The client is usually still sending then. Closing the connection under it would reset it, and
the client would see a reset instead of the 413, so the rest of the body is read and dropped
first, up to `max_discard_bytes`; past that bound the 413 goes out with `Connection: close`. A
client that sent `Expect: 100-continue` has sent no body yet: it gets the 413 at once.

A body that stops arriving for `body_idle_timeout_s` gets 408 and its connection is closed (the
routes remove what they staged when reading fails), so a stalled client holds nothing for
ever."""

from __future__ import annotations

from collections.abc import Collection

import anyio
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from yolo_orch.api.problems import problem_response
from yolo_orch.errors import ErrorCode


class BodyTooLargeError(HTTPException):
    """Raised while the body is read; an HTTPException so FastAPI passes it to the problem
    handlers instead of calling it a parse error."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than the {limit} bytes allowed")


class BodyStalledError(HTTPException):
    """Raised while the body is read: nothing of it arrived for the idle timeout."""

    def __init__(self, timeout_s: float) -> None:
        detail = f"no byte of the request body arrived for {timeout_s:g} s"
        super().__init__(408, detail, headers={"Connection": "close"})


class BodyLimits:
    def __init__(
        self,
        app: ASGIApp,
        *,
        max_request_bytes: int,
        max_upload_bytes: int,
        max_discard_bytes: int,
        body_idle_timeout_s: float,
        upload_routes: Collection[tuple[str, str]],
    ) -> None:
        """`upload_routes`: (method, path) pairs; a `{name}` segment matches any one segment."""
        self._app = app
        self._default = max_request_bytes
        self._uploads = max_upload_bytes
        self._discard = max_discard_bytes
        self._idle_timeout_s = body_idle_timeout_s
        self._upload_routes = [
            (method, [None if part.startswith("{") else part for part in path.split("/")])
            for method, path in upload_routes
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        limit = self._uploads if self._is_upload(scope) else self._default

        async def timed_receive() -> Message:
            try:
                with anyio.fail_after(self._idle_timeout_s):
                    return await receive()
            except TimeoutError:
                raise BodyStalledError(self._idle_timeout_s) from None

        headers = Headers(scope=scope)
        declared = _content_length(headers)
        if declared is not None and declared > limit:
            waiting = headers.get("expect", "").lower() == "100-continue"
            drained = (
                not waiting
                and declared <= self._discard
                and await _drop_body(timed_receive, self._discard)
            )
            response = problem_response(
                413,
                ErrorCode.BODY_TOO_LARGE,
                f"the request body ({declared} bytes) is larger than the {limit} bytes allowed",
                headers=None if drained else {"Connection": "close"},
            )
            await response(scope, receive, send)
            return
        received = 0
        closing = False
        body_ended = False

        async def limited_receive() -> Message:
            nonlocal received, closing, body_ended
            if body_ended:  # what is left to hear is the client going away: no time limit
                return await receive()
            message = await timed_receive()
            if message["type"] == "http.request":
                body_ended = not message.get("more_body", False)
                received += len(message.get("body", b""))
                if received > limit:
                    more = message.get("more_body", False)
                    closing = more and not await _drop_body(timed_receive, self._discard)
                    raise BodyTooLargeError(limit)
            return message

        async def send_closing(message: Message) -> None:
            if closing and message["type"] == "http.response.start":
                headers = [*message.get("headers", []), (b"connection", b"close")]
                message = {**message, "headers": headers}
            await send(message)

        await self._app(scope, limited_receive, send_closing)

    def _is_upload(self, scope: Scope) -> bool:
        parts = scope["path"].rstrip("/").split("/")
        return any(
            method == scope["method"]
            and len(pattern) == len(parts)
            and all(want is None or want == part for want, part in zip(pattern, parts, strict=True))
            for method, pattern in self._upload_routes
        )


async def _drop_body(receive: Receive, most: int) -> bool:
    """Read the rest of the body and drop it; whether it ended within `most` bytes (and did
    not stall)."""
    dropped = 0
    while dropped <= most:
        try:
            message = await receive()
        except BodyStalledError:
            return False
        if message["type"] != "http.request":
            return False  # the client went away
        dropped += len(message.get("body", b""))
        if not message.get("more_body", False):
            return dropped <= most
    return False


def _content_length(headers: Headers) -> int | None:
    try:
        return int(headers["content-length"])
    except (KeyError, ValueError):
        return None
