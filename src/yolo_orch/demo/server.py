"""The demo's own `yolo-orch serve`: a subprocess on a free loopback port, reading only the demo's
folder, with its data (database, job files, registry) in a folder of its own there.

Every server setting comes from this module: the caller's `YOLO_ORCH_*` variables (a config file,
tokens, other roots) are left out, so the demo behaves the same on every machine. The server runs
in a session of its own, so a Ctrl-C in the terminal reaches only the demo, which then stops the
server with one SIGTERM (a second signal would make it stop without draining).

Training runs on the server's default torch threads (all cores but one), not on every core: on
2 cores the demo's training took 11 s an epoch with 1 thread and 14 s with 2, and with 2 it slowed
to minutes an epoch while one other busy process shared the cores (each op's barrier waits for
whichever thread is descheduled).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

__all__ = ["DemoServer", "ServerFailed", "free_port"]

STARTUP_TIMEOUT_S = 120.0  # a first start imports torch and ultralytics from a cold disk cache
STOP_TIMEOUT_S = 60.0


class ServerFailed(RuntimeError):
    """The demo's server did not start, or ended while the demo needed it."""


def free_port() -> int:
    """A loopback port nobody listens on now (the kernel's pick for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class DemoServer:
    """`yolo-orch serve` with `root` as its only data and model root and `root/server` as its
    data directory; its stderr goes to `root/server.log`."""

    def __init__(self, root: Path, port: int | None = None) -> None:
        self.root = root.resolve()
        self.port = port if port is not None else free_port()
        self.log_path = self.root / "server.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def settings(self) -> dict[str, str]:
        """The server's settings as its `YOLO_ORCH_*` environment variables."""
        roots = json.dumps([str(self.root)])
        return {
            "YOLO_ORCH_DATA_DIR": str(self.root / "server"),
            "YOLO_ORCH_DATA_ROOTS": roots,
            "YOLO_ORCH_MODEL_ROOTS": roots,
            "YOLO_ORCH_HOST": "127.0.0.1",
            "YOLO_ORCH_PORT": str(self.port),
        }

    def serve_command(self, port: int = 8000) -> str:
        """A shell command that serves the demo's data again, in the foreground."""
        settings = self.settings() | {"YOLO_ORCH_PORT": str(port)}
        assignments = " ".join(f"{key}={shlex.quote(value)}" for key, value in settings.items())
        return f"{assignments} {shlex.quote(_yolo_orch_executable())} serve"

    def start(self) -> None:
        env = {key: value for key, value in os.environ.items() if not key.startswith("YOLO_ORCH_")}
        env |= self.settings() | {"PYTHONUNBUFFERED": "1"}
        self.root.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:  # the child keeps its own descriptor
            self._process = subprocess.Popen(
                [sys.executable, "-m", "yolo_orch.cli", "serve"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                start_new_session=True,
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        with httpx.Client(base_url=self.url, timeout=2.0) as client:
            while True:
                self.check_running()
                try:
                    if client.get("/healthz").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise ServerFailed(
                        f"the server did not answer within {STARTUP_TIMEOUT_S:.0f} s "
                        f"(its log: {self.log_path})"
                    )
                time.sleep(0.2)

    def check_running(self) -> None:
        """Raise `ServerFailed` when the server has exited."""
        if self._process is not None and self._process.poll() is not None:
            raise ServerFailed(
                f"the server exited with status {self._process.returncode} "
                f"(its log: {self.log_path})"
            )

    def wait(self) -> int:
        """Until the server exits by itself; its exit status."""
        if self._process is None:
            return 0
        return self._process.wait()

    def stop(self) -> int | None:
        """SIGTERM (the server drains: running jobs get their grace), then wait; the exit status,
        or None when it was not running. Killed only if it outlives `STOP_TIMEOUT_S`."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return None if process is None else process.returncode
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            return process.wait()


def _yolo_orch_executable() -> str:
    """The `yolo-orch` installed beside this Python (a venv's), else the name on PATH."""
    beside = Path(sys.executable).parent / "yolo-orch"
    return str(beside) if beside.is_file() else "yolo-orch"
