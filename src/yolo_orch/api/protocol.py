"""HTTP below the routes: HEAD answered wherever GET is, and problem JSON for the requests
uvicorn cannot parse (it would answer those itself, in plain text)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from http import HTTPStatus
from typing import Any, cast

import httptools
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn._types import ASGI3Application
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
from uvicorn.server import ServerState

from yolo_orch.api.connections import (
    PENDING_HEAD_TIMEOUT_S,
    PROBE_PATHS,
    QUIET_S,
    SHED_EXTENSION,
    Admission,
    ConnectionBook,
    Hold,
)
from yolo_orch.api.problems import PROBLEM_MEDIA_TYPE, problem_body, problem_response
from yolo_orch.errors import ErrorCode
from yolo_orch.ops.stop_signal import StopSignal


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


DEFAULT_MAX_HEAD = 16 * 1024
DEFAULT_HEAD_TIMEOUT_S = 30.0
_MAX_REASON = 200
_PER_HEADER = len(b": \r\n")


class _HeadTooLarge(Exception):
    """Raised from a parser callback: httptools stops and uvicorn's `data_received` turns it
    into `send_400_response`, which answers 431 instead."""


class _CoalescingTransport:
    """A connection's transport whose writes in one turn of the event loop go out together:
    uvicorn writes a response's head and its body apart, and each write is a send of its own
    (the first, waking the client, costs the most)."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(data)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def _flush(self) -> None:
        if self._pending and not self._transport.is_closing():
            self._transport.write(b"".join(self._pending))
        self._pending.clear()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class ProblemHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, but a request it cannot parse (a bad request line or
    header, an invalid `Transfer-Encoding`) is answered with problem JSON (400, 501), a request
    line and headers over `max_head_bytes` with a 431 (httptools sets no bound of its own), and
    a head that has not ended `head_timeout_s` after the connection opened or the request began
    with a 408 (uvicorn has no such timeout: a client trickling a head would hold its
    connection for ever); each then closes the connection as uvicorn does. With a `book`, the
    connection counts against the server's cap on connections (`api.connections`)."""

    max_head_bytes = DEFAULT_MAX_HEAD
    head_timeout_s = DEFAULT_HEAD_TIMEOUT_S
    book: ConnectionBook | None = None

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._head_open = False
        """Between a message's first byte and the end of its headers."""
        self._head_bytes = 0
        """Of an open head, counted by the feeds it spans (what the parser holds unparsed)."""
        self._parsed_head_bytes = 0
        """Of the head, counted by what the parser reports (a head that arrived in one feed)."""
        self._head_too_large = False
        self._completed_in_feed = False
        self._head_timer: asyncio.TimerHandle | None = None
        self._admission = Admission.ADMITTED
        self._last_data = 0.0
        self._shed = StopSignal()
        """The current request's: set when its connection is shed while it holds its answer
        (a `Hold` where a book counts the connections)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        coalescing = cast(asyncio.Transport, _CoalescingTransport(transport, self.loop))
        super().connection_made(coalescing)
        self._last_data = time.monotonic()  # the book's clock
        if self.book is not None:
            self._admission = self.book.admit(self)
            if self._admission is Admission.REFUSED:
                self._send_problem(503, ErrorCode.TOO_MANY_CONNECTIONS, _FULL, _RETRY_AFTER)
                return
        self._time_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        if self.book is not None:
            self.book.closed(self, self._admission)
        super().connection_lost(exc)

    def sheddable(self, now: float, pressed: bool) -> bool:
        if self.transport.is_closing():
            return False
        quiet = now - self._last_data >= QUIET_S
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            if self.pipeline:
                return False
            # Between requests; or a head on its way, or a new connection: those get a moment,
            # unless places are pressed for.
            return pressed or quiet or (cycle is not None and not self._head_open)
        if self._shed.holding:
            return True  # a wait or a stream: it only waits for the server
        return cycle.more_body and quiet

    def shed(self) -> None:
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete and self._shed.holding:
            cycle.keep_alive = False  # answered as things are, then closed
            self._shed.set()
        else:
            self.transport.close()

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        if self._admission is Admission.PENDING and self.book is not None:
            if self.book.settle(self):
                self._admission = Admission.ADMITTED
            else:
                self._admission = Admission.REFUSED
                cycle.keep_alive = False
                if cycle.scope["path"] not in PROBE_PATHS:
                    app = cast(ASGI3Application, _too_many_connections)
        super()._start_asgi_task(cycle, app)

    def on_response_complete(self) -> None:
        if self.book is not None:
            self.book.touch(self)
        super().on_response_complete()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_open, self._head_bytes, self._parsed_head_bytes = True, 0, 0
        self._time_head()

    def on_url(self, url: bytes) -> None:
        self._count_parsed(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_parsed(len(name) + len(value) + _PER_HEADER)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._head_open = False
        self._stop_head_timer()
        self._shed = StopSignal() if self.book is None else Hold(self.book)
        extensions: dict[str, Any] = {**self.scope.get("extensions", {})}
        extensions[SHED_EXTENSION] = self._shed
        self.scope["extensions"] = extensions
        super().on_headers_complete()

    def _count_parsed(self, size: int) -> None:
        self._parsed_head_bytes += size
        if self._parsed_head_bytes > self.max_head_bytes:
            self._head_too_large = True
            raise _HeadTooLarge

    def _time_head(self) -> None:
        self._stop_head_timer()
        self._head_timer = self.loop.call_later(self._head_timeout_s(), self._head_timed_out)

    def _head_timeout_s(self) -> float:
        if self._admission is Admission.PENDING:  # past the cap: no time to waste
            return min(self.head_timeout_s, PENDING_HEAD_TIMEOUT_S)
        return self.head_timeout_s

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            # A pipelined head waits on the answer before it (uvicorn reads no more until
            # then): its time starts again, the answer being sent is not cut off.
            self._time_head()
            return
        detail = f"the request line and headers did not arrive within {self._head_timeout_s():g} s"
        self._send_problem(408, ErrorCode.REQUEST_TIMEOUT, detail)

    def on_message_complete(self) -> None:
        self._completed_in_feed = True
        super().on_message_complete()

    def data_received(self, data: bytes) -> None:
        self._last_data = time.monotonic()  # the book's clock
        if self.book is not None:
            self.book.touch(self)
        self._completed_in_feed = False
        super().data_received(data)
        # A head still open after a feed in which no message ended began with this feed or
        # before it: all of the feed is head. (Where a pipelined message ended in the same
        # feed, its share is unknown and the feed is not counted: never a false 431, and at
        # most one read over the bound.)
        if self.transport.is_closing() or not self._head_open or self._completed_in_feed:
            return
        self._head_bytes += len(data)
        if self._head_bytes > self.max_head_bytes:
            self._send_too_large()

    def _send_too_large(self) -> None:
        detail = f"the request line and headers are larger than {self.max_head_bytes} bytes"
        self._send_problem(431, ErrorCode.HEADERS_TOO_LARGE, detail)

    def send_400_response(self, msg: str) -> None:
        if self._head_too_large:  # raised by `_count_parsed`, not a parse error
            self._send_too_large()
            return
        # uvicorn calls this from the `except` that caught the parser's error: the error, with
        # what was wrong, is the exception being handled.
        error = sys.exc_info()[1]
        reason = str(error or msg)[:_MAX_REASON]
        if isinstance(error, httptools.HttpParserError) and "Transfer-Encoding" in reason:
            self._send_problem(
                501, ErrorCode.NOT_IMPLEMENTED, f"unsupported transfer coding: {reason}"
            )
        else:
            detail = f"the request is not valid HTTP/1.1: {reason}"
            self._send_problem(400, ErrorCode.INVALID_HTTP, detail)

    def _send_problem(
        self, status: int, code: ErrorCode, detail: str, extra: tuple[bytes, ...] = ()
    ) -> None:
        body = json.dumps(problem_body(status, code, detail), separators=(",", ":")).encode()
        head = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}".encode()]
        head += [name + b": " + value for name, value in self.server_state.default_headers]
        head += extra
        head += [
            b"content-type: " + PROBLEM_MEDIA_TYPE.encode(),
            b"content-length: " + str(len(body)).encode(),
            b"connection: close",
        ]
        self.transport.write(b"\r\n".join(head) + b"\r\n\r\n" + body)
        self.transport.close()


_FULL = "the server has as many connections open as it allows: try again shortly"
_RETRY_AFTER = (b"retry-after: 1",)


async def _too_many_connections(scope: Scope, receive: Receive, send: Send) -> None:
    """The answer to anything but a probe on a connection let in on probation."""
    response = problem_response(
        503, ErrorCode.TOO_MANY_CONNECTIONS, _FULL, headers={"Retry-After": "1"}
    )
    await response(scope, receive, send)


def problem_http_protocol(
    max_head_bytes: int,
    head_timeout_s: float = DEFAULT_HEAD_TIMEOUT_S,
    book: ConnectionBook | None = None,
) -> type[ProblemHttpToolsProtocol]:
    """The protocol class for uvicorn's `http` setting, bounding heads at `max_head_bytes` and
    `head_timeout_s`, and counting connections in `book`."""
    bounds = {"max_head_bytes": max_head_bytes, "head_timeout_s": head_timeout_s, "book": book}
    return type("ProblemHttpToolsProtocol", (ProblemHttpToolsProtocol,), bounds)
