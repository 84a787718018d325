"""`yolo-orch serve` under systemd's notify protocol: READY once it listens, WATCHDOG pings from
the event loop, STOPPING when a signal starts the drain."""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.servers import ServerFactory


@pytest.mark.acceptance
def test_ready_watchdog_and_stopping_reach_the_notify_socket(
    server_factory: ServerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "notify.sock"
    messages: list[str] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as listener:
        listener.bind(str(path))
        listener.settimeout(0.2)
        # Read from the start, as systemd does: a datagram queue holds ten messages
        # (net.unix.max_dgram_qlen), and a slow start-up sends more pings than that before READY.
        stop_reading = threading.Event()

        def read() -> None:
            while not stop_reading.is_set():
                try:
                    messages.append(listener.recv(4096).decode())
                except TimeoutError:
                    continue

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        monkeypatch.setenv("NOTIFY_SOCKET", str(path))
        monkeypatch.setenv("WATCHDOG_USEC", "200000")  # pings every 0.1 s
        server = server_factory(shutdown_grace_s=1)
        server.start()
        try:
            # Pings start before the application has started: READY may come after several.
            _wait_for(lambda: any("READY=1" in m for m in messages), messages)
            pings = sum("WATCHDOG=1" in m for m in messages)
            _wait_for(lambda: sum("WATCHDOG=1" in m for m in messages) >= pings + 3, messages)

            server.send(signal.SIGTERM)
            _wait_for(lambda: any("STOPPING=1" in m for m in messages), messages)
            assert server.wait(timeout=15) == 0
        finally:
            stop_reading.set()
            reader.join()


def _wait_for(condition: Callable[[], bool], messages: list[str], timeout_s: float = 15) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, messages
        time.sleep(0.05)
