"""HTTP/1.1 written as raw bytes over one socket, as a hostile or careless client would, for the
tests of the server's HTTP edges and of connection floods."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any

from tests.support.problems import PROBLEM
from yolo_orch.testing import Server


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def problem(self, status: int, code: str) -> dict[str, Any]:
        assert self.status == status, (self.status, self.body)
        assert self.headers["content-type"] == PROBLEM
        problem: dict[str, Any] = json.loads(self.body)
        assert (problem["status"], problem["code"]) == (status, code)
        assert problem["type"] == f"urn:yolo-orch:problem:{code}"
        assert problem["detail"]
        return problem


class Connection:
    """One TCP connection; requests are written as raw bytes."""

    def __init__(self, server: Server) -> None:
        self._sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        self._buffer = b""

    def send(self, data: bytes) -> None:
        self._sock.sendall(data)

    def send_zeros(self, count: int, chunk: int = 1 << 16) -> None:
        block = b"0" * chunk
        while count > 0:
            self._sock.sendall(block[:count])
            count -= chunk

    def reply(self, *, head: bool = False) -> Reply:
        while b"\r\n\r\n" not in self._buffer:
            self._read()
        raw_head, _, self._buffer = self._buffer.partition(b"\r\n\r\n")
        status_line, *lines = raw_head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = 0 if head else int(headers.get("content-length", "0"))
        while len(self._buffer) < length:
            self._read()
        body, self._buffer = self._buffer[:length], self._buffer[length:]
        return Reply(int(status_line.split()[1]), headers, body)

    def closed_by_server(self) -> bool:
        return self._buffer == b"" and self._sock.recv(1) == b""

    def close(self) -> None:
        self._sock.close()

    def _read(self) -> None:
        data = self._sock.recv(1 << 16)
        if not data:
            raise ConnectionError(f"closed by the server; unparsed: {self._buffer[:200]!r}")
        self._buffer += data


def post_head(length: int | None, *extra: str) -> bytes:
    lines = ["POST /v1/jobs HTTP/1.1", "Host: localhost", "Content-Type: application/json", *extra]
    lines.append(
        f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    )
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"
