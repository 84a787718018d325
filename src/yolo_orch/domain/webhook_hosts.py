"""Where webhooks may be sent (`webhook_allowed_hosts`): no SSRF by default.

At submission a URL's host is matched as written, never resolved (the streams' matcher,
`AllowedHosts`). At delivery the name is resolved and every address it gives is checked again
(`permits`), so a name that an attacker points at the server's own network (DNS rebinding)
is refused there: a private, loopback or link-local address is allowed only when an entry
inside those ranges lists it, so `0.0.0.0/0` allows every public address and none of them."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from yolo_orch.domain.streams import AllowedHosts, check_allowed_hosts, redacted
from yolo_orch.errors import ErrorCode, InvalidJob

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

WEBHOOK_SCHEMES = ("http", "https")
SETTING = "webhook_allowed_hosts"

NON_GLOBAL_NETWORKS: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(network)
    for network in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "::1/128",
        "::/128",
        "fc00::/7",
        "fe80::/10",
    )
)
"""Private, shared, loopback, link-local and unspecified ranges: an address in one of them is
reached only when an entry within the same range lists it."""


@dataclass(frozen=True)
class WebhookHosts:
    """`webhook_allowed_hosts`: names (`hooks.example.com`), wildcards (`*.example.com`),
    addresses and networks (`127.0.0.1`, `10.0.0.0/8`). Empty (the default): none."""

    entries: tuple[str, ...] = ()
    _matcher: AllowedHosts = field(init=False, repr=False, compare=False)
    _private: tuple[IPNetwork, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_allowed_hosts(self.entries, SETTING)
        object.__setattr__(self, "_matcher", AllowedHosts(self.entries))
        networks = [_network(entry) for entry in self.entries]
        private = tuple(net for net in networks if net is not None and _non_global(net))
        object.__setattr__(self, "_private", private)

    def check(self, url: str) -> None:
        """Refuse (`webhook_not_allowed`) a URL that is not http(s) or whose host is not
        allowed, as written; the message shows the URL redacted."""
        try:
            parts = urlsplit(url)
            shown = redacted(url)  # reads the port: refuses one out of range
        except ValueError as exc:  # an unclosed [ipv6 address, a port past 65535
            raise InvalidJob(
                f"webhook URL is not one: {exc}", code=ErrorCode.WEBHOOK_NOT_ALLOWED
            ) from None
        if parts.scheme.lower() not in WEBHOOK_SCHEMES:
            raise InvalidJob(
                f"webhook {shown!r}: webhooks are sent to http or https URLs",
                code=ErrorCode.WEBHOOK_NOT_ALLOWED,
            )
        if not self.entries:
            raise InvalidJob(
                f"webhook {shown!r}: this server sends webhooks to no host (its "
                f"{SETTING} is empty; webhooks also need webhook_secrets)",
                code=ErrorCode.WEBHOOK_NOT_ALLOWED,
            )
        host = (parts.hostname or "").lower().rstrip(".")
        if not host:
            raise InvalidJob(f"webhook {shown!r} names no host", code=ErrorCode.WEBHOOK_NOT_ALLOWED)
        address = _address(host)
        if not self._matcher.allows(host) or (address is not None and not self.permits(address)):
            raise InvalidJob(
                f"webhook {shown!r}: host {host!r} is not in {SETTING} (set "
                "YOLO_ORCH_WEBHOOK_ALLOWED_HOSTS to the receivers' names or networks; a "
                "private or loopback address must be listed by an entry in its own range)",
                code=ErrorCode.WEBHOOK_NOT_ALLOWED,
            )

    def permits(self, address: IPAddress) -> bool:
        """Whether a delivery may connect to `address` (one its URL's name resolved to): any
        public address, and the others only when an entry in their own range lists them."""
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if not any(address in net for net in NON_GLOBAL_NETWORKS) and address.is_global:
            return True
        return any(address in net for net in self._private)


NO_WEBHOOK_HOSTS = WebhookHosts()
"""The default: webhooks go nowhere."""


def check_webhook_urls(urls: Sequence[str], hosts: WebhookHosts) -> None:
    """Refuse, with a ValueError for the settings, a server endpoint the hosts do not allow."""
    for url in urls:
        try:
            hosts.check(url)
        except InvalidJob as refused:
            raise ValueError(f"webhooks endpoint: {refused}") from None


def _non_global(network: IPNetwork) -> bool:
    return any(
        network.version == outer.version and network.subnet_of(outer)  # type: ignore[arg-type]
        for outer in NON_GLOBAL_NETWORKS
    )


def _network(entry: str) -> IPNetwork | None:
    try:
        return ipaddress.ip_network(entry.strip("[]"), strict=False)
    except ValueError:
        return None


def _address(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        return None
