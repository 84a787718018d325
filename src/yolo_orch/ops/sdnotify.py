"""A tiny client of systemd's notify protocol (`sd_notify(3)`), with no dependency.

Under `Type=notify`, systemd passes a datagram socket in `$NOTIFY_SOCKET` (a path, or an abstract
name written with a leading `@`) and, when `WatchdogSec=` is set, the watchdog period in
`$WATCHDOG_USEC` (for the process `$WATCHDOG_PID` names, when set). Outside systemd the variables
are absent and every call is a no-op that returns False.

The watchdog pings come from a task on the event loop, so a loop that stops turning (a blocking
call, a deadlock) stops the pings and systemd restarts the service.

The environment is read once, by `Notifier.from_environ`, at the entry point.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Mapping

log = logging.getLogger(__name__)


class Notifier:
    """Sends state lines to systemd. Never raises: a failed send is logged and returns False."""

    def __init__(
        self,
        address: str | None,
        *,
        watchdog_usec: int | None = None,
        watchdog_pid: int | None = None,
    ) -> None:
        self.address = address or None
        self._watchdog_usec = watchdog_usec if watchdog_usec and watchdog_usec > 0 else None
        self._watchdog_pid = watchdog_pid

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Notifier:
        return cls(
            environ.get("NOTIFY_SOCKET"),
            watchdog_usec=_int(environ.get("WATCHDOG_USEC")),
            watchdog_pid=_int(environ.get("WATCHDOG_PID")),
        )

    @property
    def enabled(self) -> bool:
        return self.address is not None

    @property
    def watchdog_interval_s(self) -> float | None:
        """Half the watchdog period (systemd's advice), or None when no watchdog is asked of
        this process."""
        if not self.enabled or self._watchdog_usec is None:
            return None
        if self._watchdog_pid is not None and self._watchdog_pid != os.getpid():
            return None
        return self._watchdog_usec / 2_000_000

    def notify(self, *lines: str) -> bool:
        """Send `lines` (`KEY=value` each) in one datagram; True when it was sent."""
        if self.address is None:
            return False
        address = "\0" + self.address[1:] if self.address.startswith("@") else self.address
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.setblocking(False)  # never stall the event loop on a full queue
                sock.sendto("\n".join(lines).encode(), address)
        except OSError as exc:
            log.warning("sd_notify to %s failed: %s", self.address, exc)
            return False
        return True

    def ready(self, status: str | None = None) -> bool:
        """Start-up is complete: the server answers requests."""
        return self.notify("READY=1", *_status(status))

    def stopping(self, status: str | None = None) -> bool:
        return self.notify("STOPPING=1", *_status(status))

    def status(self, text: str) -> bool:
        """Free text that `systemctl status` shows."""
        return self.notify(*_status(text))

    def extend_timeout(self, seconds: float) -> bool:
        """Ask for `seconds` more before the start or stop timeout fires (a long drain)."""
        return self.notify(f"EXTEND_TIMEOUT_USEC={round(seconds * 1_000_000)}")

    def watchdog(self) -> bool:
        return self.notify("WATCHDOG=1")

    async def watchdog_loop(self) -> None:
        """Ping the watchdog every `watchdog_interval_s` until cancelled; returns at once when
        there is no watchdog to ping."""
        interval = self.watchdog_interval_s
        if interval is None:
            return
        log.info("systemd watchdog: a ping every %.1fs", interval)
        while True:
            self.watchdog()
            await asyncio.sleep(interval)


def _status(text: str | None) -> list[str]:
    return [] if text is None else ["STATUS=" + " ".join(text.splitlines())]


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value else None
    except ValueError:
        return None
