"""`yolo-orch serve` under systemd's notify protocol: READY once it listens, WATCHDOG pings from
the event loop, STOPPING when a signal starts the drain."""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path

import pytest

from tests.support.servers import ServerFactory


@pytest.mark.acceptance
def test_ready_watchdog_and_stopping_reach_the_notify_socket(
    server_factory: ServerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as listener:
        listener.bind(str(path))
        listener.settimeout(10)
        monkeypatch.setenv("NOTIFY_SOCKET", str(path))
        monkeypatch.setenv("WATCHDOG_USEC", "200000")  # pings every 0.1 s
        server = server_factory(shutdown_grace_s=1)
        server.start()

        messages = []
        deadline = time.monotonic() + 10
        # Pings start before the application has started: READY may come after several.
        while time.monotonic() < deadline and not (
            any("READY=1" in m for m in messages) and sum("WATCHDOG=1" in m for m in messages) >= 3
        ):
            messages.append(listener.recv(4096).decode())
        assert any("READY=1" in message for message in messages)
        assert sum("WATCHDOG=1" in message for message in messages) >= 3

        server.send(signal.SIGTERM)
        while not any("STOPPING=1" in message for message in messages):
            messages.append(listener.recv(4096).decode())
        assert server.wait(timeout=15) == 0
