"""The HTTP client deliveries use: its connections go only to addresses `WebhookHosts`
permits, checked where the connection is made, on the address it is made to.

A check of the name before the request would leave a gap: the client resolves the name
again, and a name an attacker controls can answer a public address to the check and a
private one to the connection (DNS rebinding). So the network backend under httpx resolves
the name itself, keeps the first permitted address, and connects to that one; TLS still
verifies the certificate against the URL's name (httpcore passes it as `server_hostname`)."""

from __future__ import annotations

import ipaddress
import select
import socket
import ssl
import time
from collections.abc import Iterable
from typing import Any

import anyio
import httpcore
import httpx

from yolo_orch import __version__
from yolo_orch.domain.webhook_hosts import SETTING, IPAddress, WebhookHosts

USER_AGENT = f"yolo-orch/{__version__} (webhooks)"


class GuardedNetwork(httpcore.AsyncNetworkBackend):
    """TCP connections to permitted addresses only; anything else is a `ConnectError`
    whose message says why (it becomes the attempt's error)."""

    def __init__(self, hosts: WebhookHosts) -> None:
        self._hosts = hosts
        self._backend = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        address = await self._permitted_address(host, port)
        stream = await self._backend.connect_tcp(
            str(address),
            port,
            timeout=timeout,
            local_address=local_address,
            socket_options=socket_options,
        )
        return KeptStream(stream, stream.get_extra_info("socket"))

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("webhooks are sent over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self._backend.sleep(seconds)

    async def _permitted_address(self, host: str, port: int) -> IPAddress:
        addresses = await _resolve(host, port)
        for address in addresses:
            if self._hosts.permits(address):
                return address
        shown = ", ".join(sorted({str(address) for address in addresses}))
        raise httpcore.ConnectError(
            f"{host} resolves to {shown}: a private, loopback or link-local address that "
            f"{SETTING} does not list"
        )


async def _resolve(host: str, port: int) -> list[IPAddress]:
    """The addresses of `host` (bounded in time by the deliverer's limit on the whole try)."""
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    try:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from None
    # An IPv6 link-local address comes with its zone (`fe80::1%eth0`).
    return [ipaddress.ip_address(str(info[4][0]).partition("%")[0]) for info in infos]


IN_USE_S = 0.5
"""A connection used this recently is taken as open without asking the kernel: receivers
close idle connections after seconds (uvicorn 5, Node.js 5, gunicorn 2, nginx 75)."""


class KeptStream(httpcore.AsyncNetworkStream):
    """A connection whose "has the receiver closed it?" check is cheap.

    httpcore asks that of every kept connection each time it places a request, and anyio's
    stream answers by building all its attributes afresh (a getpeername each), then polls the
    socket: under load, most of a delivery's CPU time. Here: no for a connection used in the
    last `IN_USE_S`, else a poll of a socket found once. Everything else is the stream's own."""

    def __init__(self, stream: httpcore.AsyncNetworkStream, sock: socket.socket | None) -> None:
        self._stream = stream
        self._socket = sock
        self._used_at = time.monotonic()

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        data = await self._stream.read(max_bytes, timeout)
        self._used_at = time.monotonic()
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        await self._stream.write(buffer, timeout)
        self._used_at = time.monotonic()

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
    ) -> httpcore.AsyncNetworkStream:
        tls = await self._stream.start_tls(ssl_context, server_hostname, timeout)
        return KeptStream(tls, self._socket)

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            if time.monotonic() - self._used_at < IN_USE_S:
                return False
            return self._socket is None or _readable(self._socket)
        if info == "socket":
            return self._socket
        return self._stream.get_extra_info(info)


def _readable(sock: socket.socket) -> bool:
    """Whether a read would not wait: data, or the end a closed connection reads as."""
    fd = sock.fileno()
    if fd < 0:
        return True
    poll = select.poll()
    poll.register(fd, select.POLLIN)
    return bool(poll.poll(0))


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport on a `GuardedNetwork`: no proxies from the environment (they
    would connect for us), no unix sockets."""

    def __init__(self, hosts: WebhookHosts, connections: int) -> None:
        super().__init__(trust_env=False)
        # The pool httpx built has the default network backend, which the constructor offers
        # no way to replace: build it again, as httpx does, on ours.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=connections,
            max_keepalive_connections=connections,
            keepalive_expiry=5.0,
            network_backend=GuardedNetwork(hosts),
        )


def webhook_client(hosts: WebhookHosts, *, connections: int, timeout_s: float) -> httpx.AsyncClient:
    """The deliverer's client: at most `connections` at once, `timeout_s` per phase of a
    request, no redirects (a 3xx is a failed try, never a request to another host)."""
    return httpx.AsyncClient(
        transport=GuardedTransport(hosts, connections),
        timeout=httpx.Timeout(timeout_s),
        follow_redirects=False,
        trust_env=False,
        headers={"user-agent": USER_AGENT},
    )
