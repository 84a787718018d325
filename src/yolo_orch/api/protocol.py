"""HTTP below the routes: HEAD answered wherever GET is, and problem JSON for the requests
uvicorn cannot parse (it would answer those itself, in plain text)."""

from __future__ import annotations

import asyncio
import json
from http import HTTPStatus
from typing import Any

import h11
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from yolo_orch.api.problems import PROBLEM_MEDIA_TYPE, problem_body


class HeadAsGet:
    """HEAD runs the GET route and sends its status and headers without the body (FastAPI
    routes answer GET only). A streamed body (the event stream) ends with the headers: the
    server then tells the app that the client is gone, which stops the stream."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self._app(scope, receive, send)
            return
        ended = False

        async def headers_only(message: Message) -> None:
            nonlocal ended
            if ended:
                return
            if message["type"] == "http.response.body":
                ended = True
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self._app({**scope, "method": "GET"}, receive, headers_only)


_PARSE_ERRORS = {
    400: "invalid_http",
    431: "headers_too_large",
    501: "not_implemented",
}


_MAX_REASON = 200
H11_DEFAULT_MAX_HEAD = 16 * 1024
"""h11's own bound on a request's line and headers, where the config sets none."""


class _RecordingConnection(h11.Connection):
    """Keeps the parse error that uvicorn catches and drops, for its status hint and text."""

    last_error: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        try:
            return super().next_event()
        except h11.RemoteProtocolError as exc:
            self.last_error = exc
            raise


class ProblemH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, but a request it cannot parse (a bad request line or header,
    headers over `h11_max_incomplete_event_size`, an unsupported transfer coding) is answered
    with problem JSON and the status h11 suggests (400, 431, 501), then the connection is
    closed as uvicorn closes it."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._max_head = config.h11_max_incomplete_event_size or H11_DEFAULT_MAX_HEAD
        self.conn = _RecordingConnection(h11.SERVER, self._max_head)

    def send_400_response(self, msg: str) -> None:
        assert isinstance(self.conn, _RecordingConnection)
        error = self.conn.last_error
        status = error.error_status_hint if error is not None else 400
        code = _PARSE_ERRORS.get(status, "invalid_http")
        if status == 431:
            detail = f"the request line and headers are larger than {self._max_head} bytes"
        else:
            reason = str(error or msg)  # h11 quotes the client's bytes: keep it short
            detail = f"the request is not valid HTTP/1.1: {reason[:_MAX_REASON]}"
        body = json.dumps(problem_body(status, code, detail), separators=(",", ":")).encode()
        headers = [
            (b"content-type", PROBLEM_MEDIA_TYPE.encode()),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        for event in (
            h11.Response(status_code=status, headers=headers, reason=HTTPStatus(status).phrase),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event) or b"")
        self.transport.close()
