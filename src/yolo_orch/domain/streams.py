"""Live streams as values: their health, how a source URL is shown (credentials redacted), and
which network sources a server may open (`stream_allowed_hosts`: no SSRF by default)."""

from __future__ import annotations

import enum
import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from yolo_orch.errors import ErrorCode, InvalidJob


class StreamHealth(enum.StrEnum):
    """Where a stream's sources stand (its progress `detail.health`; the worst source's)."""

    CONNECTING = "connecting"
    LIVE = "live"
    RECONNECTING = "reconnecting"
    SOURCE_LOST = "source_lost"
    """Gave up after `reconnect_give_up_s`: the job then fails `source_lost`."""


NETWORK_SCHEMES = ("rtsp", "rtsps", "http", "https")
"""What a stream may open over the network: RTSP cameras, HTTP(S) MJPEG or HLS."""

REDACTED = "***"
_SECRET_QUERY_KEY = re.compile(r"pass|pwd|token|key|secret|auth|sig|cred", re.IGNORECASE)


def is_network_source(source: str) -> bool:
    return urlsplit(source).scheme.lower() in NETWORK_SCHEMES


def redacted(source: str) -> str:
    """`source` as anyone may see it: a URL's user and password, and the values of query
    parameters that look like secrets (`token`, `password`, `key`, ...), replaced by `***`.
    A local path is shown as it is."""
    if not is_network_source(source):
        return source
    parts = urlsplit(source)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    if parts.username is not None or parts.password is not None:
        netloc = f"{REDACTED}@{netloc}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [(key, REDACTED if _SECRET_QUERY_KEY.search(key) else value) for key, value in pairs],
            safe="*",
        )
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


@dataclass(frozen=True)
class AllowedHosts:
    """The network hosts streams may open: names (`cam1.lan`), wildcards (`*.cams.lan`), IP
    addresses and networks (`10.20.0.0/16`). Empty (the default): none; local videos only.

    A name is matched as written, never resolved: an allowed address reached through a name
    must be listed by that name too, so a name an attacker controls cannot point inside."""

    entries: tuple[str, ...] = ()

    def check(self, source: str) -> None:
        """Refuse (`source_not_allowed`) a network source whose scheme or host is not allowed;
        the message shows the source redacted."""
        parts = urlsplit(source)
        shown = redacted(source)
        if parts.scheme.lower() not in NETWORK_SCHEMES:
            raise InvalidJob(
                f"source {shown!r}: streams open {', '.join(NETWORK_SCHEMES)} URLs or local videos",
                code=ErrorCode.SOURCE_NOT_ALLOWED,
            )
        host = (parts.hostname or "").lower().rstrip(".")
        if not host:
            raise InvalidJob(f"source {shown!r} names no host", code=ErrorCode.SOURCE_NOT_ALLOWED)
        if not self.allows(host):
            raise InvalidJob(
                f"source {shown!r}: host {host!r} is not in stream_allowed_hosts (set "
                "YOLO_ORCH_STREAM_ALLOWED_HOSTS to the cameras' names or networks)",
                code=ErrorCode.SOURCE_NOT_ALLOWED,
            )

    def allows(self, host: str) -> bool:
        """Whether `host` (lower case, an address without brackets) matches an entry."""
        address = _address(host)
        for raw in self.entries:
            entry = raw.lower().rstrip(".")
            if "/" in entry or _address(entry) is not None:
                if address is not None and address in _network(entry):
                    return True
            elif entry.startswith("*."):
                if host.endswith(entry[1:]):
                    return True
            elif host == entry:
                return True
        return False


NO_HOSTS = AllowedHosts()
"""The default: streams open local videos only."""


def _network(entry: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    return ipaddress.ip_network(entry.strip("[]"), strict=False)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return None


def check_allowed_hosts(entries: Sequence[str], setting: str = "stream_allowed_hosts") -> None:
    """Refuse an entry of `setting` that is none of a name, wildcard, address or network (a
    typo would otherwise allow nothing, silently)."""
    for entry in entries:
        if "/" in entry:
            _network(entry)  # its ValueError names the entry
        elif not re.fullmatch(r"(\*\.)?[A-Za-z0-9_.-]+|[0-9A-Fa-f:.\[\]]+", entry):
            raise ValueError(f"{setting} entry {entry!r} is not a host or network")
