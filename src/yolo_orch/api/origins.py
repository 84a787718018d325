"""Requests from the server's own pages and its own names only.

A server on loopback without tokens trusts whoever can reach it, and a page on any site can
reach it through the visitor's browser: by posting to it across sites (the browser sends it,
whatever CORS says of reading the answer), or by DNS rebinding (the attacker's name made to
point at 127.0.0.1, so the page reads the answers as same-origin). So:

- a request whose `Host` is not a name of this server gets 421 `host_not_allowed` (a rebound
  name is the attacker's); the probes answer whatever the name, as load balancers ask by
  address;
- a request that may change something (any method but GET, HEAD, OPTIONS) from a page of
  another origin (its `Origin`, or `Sec-Fetch-Site: cross-site` where no `Origin` is sent) gets
  403 `cross_origin`, unless that origin is in `allowed_origins`.

Clients that are not browsers send no `Origin`, and are not affected.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from yolo_orch.api.connections import PROBE_PATHS
from yolo_orch.api.problems import SAFE_METHODS, problem_response
from yolo_orch.errors import ErrorCode

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
ANY_HOST = "*"
EXPOSED_HEADERS = ["Location", "Retry-After", "Preference-Applied", "Idempotent-Replayed", "ETag"]
"""What the pages of allowed origins may read of an answer besides the CORS-safelisted headers."""
_WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::", "[::]"})


def host_names(bind_host: str, allowed: Iterable[str]) -> frozenset[str]:
    """The names a request's `Host` may carry: the bind address (unless it is a wildcard),
    the loopback names and `allowed`, lowered, IPv6 addresses in brackets."""
    names = {*LOOPBACK_NAMES, *allowed}
    if bind_host not in _WILDCARD_BINDS:
        names.add(bind_host)
    return frozenset(_bracketed(name.lower()) for name in names)


class SameOrigin:
    def __init__(
        self, app: ASGIApp, *, hosts: frozenset[str], allowed_origins: Iterable[str]
    ) -> None:
        self._app = app
        self._hosts = hosts
        self._any_host = ANY_HOST in hosts
        self._origins = frozenset(origin.rstrip("/").lower() for origin in allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host")
        refusal = None
        if host is not None and not self._host_allowed(host, scope["path"]):
            detail = (
                f"this server does not answer to the name {host[:100]!r}: add it to "
                "allowed_hosts (YOLO_ORCH_ALLOWED_HOSTS) if clients reach it by that name"
            )
            refusal = problem_response(421, ErrorCode.HOST_NOT_ALLOWED, detail)
        elif scope["method"] not in SAFE_METHODS and not self._same_origin(headers, host):
            origin = headers.get("origin", "another site")[:100]
            detail = (
                f"requests that change something are not taken from pages of {origin}: add "
                "that origin to allowed_origins (YOLO_ORCH_ALLOWED_ORIGINS) to allow them"
            )
            refusal = problem_response(403, ErrorCode.CROSS_ORIGIN, detail)
        if refusal is None:
            await self._app(scope, receive, send)
        else:
            await refusal(scope, receive, send)

    def _host_allowed(self, host: str, path: str) -> bool:
        return self._any_host or path in PROBE_PATHS or _hostname(host) in self._hosts

    def _same_origin(self, headers: Headers, host: str | None) -> bool:
        origin = headers.get("origin")
        if origin is None:  # not a browser, or one that says where the request comes from
            return headers.get("sec-fetch-site") != "cross-site"
        origin = origin.rstrip("/").lower()
        if origin in self._origins:
            return True
        parts = urlsplit(origin)
        # The scheme is not compared: behind a TLS proxy the page is https, the request http.
        return host is not None and parts.netloc != "" and parts.netloc == host.lower()


def _hostname(host: str) -> str:
    """The name of a `Host` value, without its port: `[::1]:8000` is `[::1]`."""
    host = host.lower()
    if host.startswith("["):
        return host.partition("]")[0] + "]"
    return host.rpartition(":")[0] if host.count(":") == 1 else host


def _bracketed(name: str) -> str:
    """IPv6 addresses as a `Host` carries them."""
    try:
        address = ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return name
    return f"[{address}]" if address.version == 6 else name
