"""A loopback webhook receiver for tests and benchmarks: an HTTP server on a thread of its own
that verifies each delivery's signature with the `standardwebhooks` library (as a receiver
would), records when it came, and can fail the first tries of each message."""

from __future__ import annotations

import base64
import json
import os
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from standardwebhooks import Webhook, WebhookVerificationError


def new_secret() -> str:
    """A Standard Webhooks secret: `whsec_` and the base64 of 32 random bytes."""
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


@dataclass(frozen=True)
class Received:
    at: float
    """`time.time()` when the request's body had been read."""
    id: str
    """Its `webhook-id`."""
    payload: dict[str, Any]
    verified: bool
    """Whether the receiver's secret verified its signature."""
    status: int
    """What the receiver answered."""

    @property
    def event(self) -> str:
        return str(self.payload["data"]["event"])

    @property
    def job_id(self) -> str:
        return str(self.payload["data"]["id"])


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A sender that went away mid-request (a server stopped) is no error of the test's."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class WebhookReceiver:
    """Receives webhooks at `url` (127.0.0.1, a free port) while open; verifies them with
    `secret` (400 when that fails); answers 500 to the first `fail_first` tries of each
    message id, then 204. On
    `port`, when given (a URL the server was told before the receiver listened)."""

    def __init__(
        self, secret: str, *, fail_first: int = 0, path: str = "/hooks", port: int = 0
    ) -> None:
        self._webhook = Webhook(secret)
        self._fail_first = fail_first
        self._path = path
        self._lock = threading.Lock()
        self._tries: Counter[str] = Counter()
        self.received: list[Received] = []
        """Every request, in the order they came."""
        self._server = _QuietServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{self._path}"

    def __enter__(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def accepted(self) -> list[Received]:
        """The deliveries it answered with a 2xx, in order."""
        with self._lock:
            return [each for each in self.received if 200 <= each.status < 300]

    def accepted_of(self, job_id: str) -> list[Received]:
        return [each for each in self.accepted() if each.job_id == job_id]

    def _take(self, headers: dict[str, str], body: bytes) -> int:
        at = time.time()
        try:
            payload, verified = self._webhook.verify(body, headers), True
        except WebhookVerificationError:
            verified = False
            try:
                payload = json.loads(body)
            except ValueError:  # cut short: its sender went away mid-request
                payload = {}
        msg_id = headers.get("webhook-id", "")
        with self._lock:
            self._tries[msg_id] += 1
            if not verified:
                status = 400  # as a receiver does: it was not signed with its secret
            elif self._tries[msg_id] <= self._fail_first:
                status = 500
            else:
                status = 204
            self.received.append(Received(at, msg_id, payload, verified, status))
        return status

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a real receiver would

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                status = receiver._take({k.lower(): v for k, v in self.headers.items()}, body)
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: tests read `received`, not stderr."""

        return Handler
