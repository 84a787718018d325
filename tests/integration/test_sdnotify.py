"""The systemd notify client against a fake notify socket, and the unit file against systemd."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from yolo_orch.ops.sdnotify import Notifier

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy" / "yolo-orch.service"


class FakeSystemd:
    """The receiving end of `$NOTIFY_SOCKET`: an AF_UNIX datagram socket."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind("\0" + address[1:] if address.startswith("@") else address)
        self.sock.settimeout(2.0)

    def receive(self) -> str:
        return self.sock.recv(4096).decode()

    def pending(self) -> list[str]:
        messages = []
        self.sock.setblocking(False)
        try:
            while True:
                messages.append(self.sock.recv(4096).decode())
        except BlockingIOError:
            return messages
        finally:
            self.sock.settimeout(2.0)


@pytest.fixture
def systemd() -> Iterator[FakeSystemd]:
    # A short folder: socket paths are limited to 107 bytes, pytest's tmp_path can be longer.
    with tempfile.TemporaryDirectory(prefix="sdn-") as folder:
        fake = FakeSystemd(str(Path(folder) / "notify.sock"))
        try:
            yield fake
        finally:
            fake.sock.close()


def test_ready_status_stopping_reach_systemd(systemd: FakeSystemd) -> None:
    notifier = Notifier.from_environ({"NOTIFY_SOCKET": systemd.address})
    assert notifier.enabled
    assert notifier.ready(status="serving on 127.0.0.1:8000")
    assert systemd.receive() == "READY=1\nSTATUS=serving on 127.0.0.1:8000"
    assert notifier.status("draining\n3 jobs")
    assert systemd.receive() == "STATUS=draining 3 jobs"  # one line: a newline would split it
    assert notifier.extend_timeout(1.5)
    assert systemd.receive() == "EXTEND_TIMEOUT_USEC=1500000"
    assert notifier.stopping()
    assert systemd.receive() == "STOPPING=1"
    assert notifier.watchdog()
    assert systemd.receive() == "WATCHDOG=1"


def test_abstract_socket() -> None:
    name = f"@yolo-orch-test-{os.getpid()}"
    fake = FakeSystemd(name)
    try:
        assert Notifier(name).ready()
        assert fake.receive() == "READY=1"
    finally:
        fake.sock.close()


def test_without_systemd_everything_is_a_no_op() -> None:
    notifier = Notifier.from_environ({})
    assert not notifier.enabled
    assert notifier.ready() is False
    assert notifier.stopping() is False
    assert notifier.watchdog() is False
    assert notifier.watchdog_interval_s is None


def test_a_socket_that_is_gone_is_reported_not_raised(tmp_path: Path) -> None:
    assert Notifier(str(tmp_path / "absent.sock")).ready() is False


@pytest.mark.parametrize(
    ("environ", "interval"),
    [
        ({"WATCHDOG_USEC": "30000000"}, 15.0),
        ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid())}, 15.0),
        ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"}, None),  # another process's
        ({"WATCHDOG_USEC": "0"}, None),
        ({"WATCHDOG_USEC": "soon"}, None),
        ({}, None),
    ],
)
def test_watchdog_interval_is_half_the_period(
    environ: dict[str, str], interval: float | None
) -> None:
    notifier = Notifier.from_environ({"NOTIFY_SOCKET": "/run/notify", **environ})
    assert notifier.watchdog_interval_s == interval


def test_no_watchdog_without_a_socket() -> None:
    assert Notifier.from_environ({"WATCHDOG_USEC": "30000000"}).watchdog_interval_s is None


async def test_watchdog_loop_pings_while_the_loop_turns(systemd: FakeSystemd) -> None:
    notifier = Notifier(systemd.address, watchdog_usec=100_000)  # a ping every 50 ms
    task = asyncio.create_task(notifier.watchdog_loop())
    await asyncio.sleep(0.32)
    assert len(systemd.pending()) >= 4

    # A wedged loop stops the pings: that is what lets systemd restart the service.
    time.sleep(0.3)  # noqa: ASYNC251 (on purpose: the loop is blocked, no ping can be sent)
    assert len(systemd.pending()) <= 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_watchdog_loop_returns_when_no_watchdog_is_asked() -> None:
    await asyncio.wait_for(Notifier(None).watchdog_loop(), timeout=1)


def test_unit_file_passes_systemd_analyze(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd)")
    # `verify` also checks that ExecStart's binary exists: point it at one that does.
    unit = tmp_path / UNIT.name
    text = UNIT.read_text()
    assert "ExecStart=/opt/yolo-orch/.venv/bin/yolo-orch serve" in text
    unit.write_text(text.replace("/opt/yolo-orch/.venv/bin/yolo-orch", shutil.which("true") or ""))
    result = subprocess.run(
        [analyze, "verify", "--man=no", "--generators=no", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    problems = [
        line
        for line in (result.stdout + result.stderr).splitlines()
        if UNIT.name in line or "yolo-orch" in line
    ]
    assert result.returncode == 0, result.stdout + result.stderr
    assert problems == [], "\n".join(problems)
