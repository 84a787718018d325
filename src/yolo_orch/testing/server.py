"""A real `yolo-orch serve` subprocess on a free loopback port, for tests and benchmarks.

Every setting the server reads comes from here: the caller's `YOLO_ORCH_*` variables are left out
of its environment. Each start writes the server's stderr to a file of its own, and every wait has
a deadline.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx

from yolo_orch.demo.server import free_port

__all__ = [
    "CheckFailed",
    "Server",
    "ServerExited",
    "free_port",
    "read_cpu_s",
    "read_rss_kib",
    "require",
    "running_server",
]

STARTUP_TIMEOUT_S = 20.0
LOG_TAIL_CHARS = 6000


class CheckFailed(AssertionError):
    """A harness check that failed: raised by `require`, which, unlike `assert`, still checks
    under `python -O` (bench.chaos runs these checks outside pytest)."""


def require(condition: object, message: object = "check failed") -> None:
    if not condition:
        raise CheckFailed(str(message))


class ServerExited(RuntimeError):
    """The server process ended while its caller waited for it to answer."""


def env_value(value: object) -> str:
    """A setting as the server reads it from the environment: lists (lanes, data_roots,
    model_roots) and tables (batch_max_images) as JSON, anything else as its string."""
    if isinstance(value, list | tuple):
        return json.dumps([str(item) for item in value])
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


class Server:
    """One `yolo-orch serve` on a fixed loopback port and data directory, with `settings` (the
    simulated runtime unless they say otherwise); it may be started, stopped, killed and started
    again any number of times (each start logs to its own file in `log_dir`)."""

    def __init__(
        self,
        data_dir: Path,
        log_dir: Path,
        name: str = "server",
        **settings: object,
    ) -> None:
        self.data_dir = data_dir
        self.log_dir = log_dir
        self.name = name
        self.wrap: list[str] = []
        """A command the server runs under (`prlimit ... --`)."""
        self.port = free_port()
        self.settings: dict[str, object] = {"runtime": "simulated", **settings}
        self.starts = 0
        self.log_paths: list[Path] = []
        self.startup_s = 0.0
        """Of the latest start: from starting the process to its first answer on /healthz."""
        self.startup_cpu_s = 0.0
        """The CPU time the process had used by then: what start-up costs, whatever the load."""
        self._process: subprocess.Popen[bytes] | None = None
        self._started_at = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self._require_process().pid

    @property
    def log_path(self) -> Path:
        """The stderr of the latest start."""
        return self.log_paths[-1]

    def stderr(self) -> str:
        """What the latest start wrote to stderr so far."""
        return self.log_path.read_text(errors="replace")

    def rss_kib(self) -> int:
        """Resident memory of the server process (VmRSS), in KiB."""
        return read_rss_kib(self.pid)

    def env(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if not key.startswith("YOLO_ORCH_")}
        env.update(
            {f"YOLO_ORCH_{key.upper()}": env_value(value) for key, value in self.settings.items()}
        )
        env["YOLO_ORCH_DATA_DIR"] = str(self.data_dir)
        env["YOLO_ORCH_HOST"] = "127.0.0.1"
        env["YOLO_ORCH_PORT"] = str(self.port)
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def start(self, *, wait_ready: bool = True, timeout: float = STARTUP_TIMEOUT_S) -> None:
        if self.running:
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        self.starts += 1
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{self.name}-{self.starts}.stderr.log"
        self.log_paths.append(log_path)
        with log_path.open("wb") as stderr:  # the child keeps its own descriptor
            self._started_at = time.perf_counter()
            self._process = subprocess.Popen(
                [*self.wrap, sys.executable, "-m", "yolo_orch.cli", "serve"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=self.env(),
            )
        if wait_ready:
            self.wait_ready(timeout)

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT_S) -> None:
        """Until `/healthz` answers 200; fails at once if the process exits meanwhile."""
        deadline = time.monotonic() + timeout
        with httpx.Client(base_url=self.url, timeout=1.0) as client:
            while True:
                code = self.returncode
                if code is not None:
                    raise ServerExited(
                        f"{self.name} exited with {code} before it answered /healthz:\n"
                        f"{self.stderr()[-LOG_TAIL_CHARS:]}"
                    )
                with contextlib.suppress(httpx.TransportError):
                    if client.get("/healthz").status_code == 200:
                        self.startup_s = time.perf_counter() - self._started_at
                        self.startup_cpu_s = read_cpu_s(self.pid)
                        return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{self.name} did not answer /healthz within {timeout}s")
                time.sleep(0.02)

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def returncode(self) -> int | None:
        """The exit status of the latest start; None while it runs (or before any start)."""
        return None if self._process is None else self._process.poll()

    def send(self, sig: signal.Signals) -> None:
        self._require_process().send_signal(sig)

    def wait(self, timeout: float) -> int:
        """The exit status, once the process ends; `TimeoutError` after `timeout` seconds."""
        try:
            return self._require_process().wait(timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"{self.name} still runs after {timeout}s") from None

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 15.0) -> int:
        """Ask the server to stop and wait for it."""
        self.send(sig)
        return self.wait(timeout)

    def kill(self) -> int:
        """SIGKILL: nothing in the server gets to run."""
        process = self._require_process()
        if process.poll() is None:
            process.kill()
        return process.wait(10)

    def client(self, timeout: float = 10.0) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=timeout)

    def cleanup(self) -> None:
        """Kill the process if it still runs."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(10)

    def log_tails(self) -> str:
        """The tail of every start's log, for a report on a failure."""
        tails = []
        for path in self.log_paths:
            text = path.read_text(errors="replace") if path.exists() else "(no log)"
            tails.append(f"===== {path.name} (tail) =====\n{text[-LOG_TAIL_CHARS:]}")
        return "\n".join(tails)

    def _require_process(self) -> subprocess.Popen[bytes]:
        if self._process is None:
            raise RuntimeError(f"{self.name} was never started")
        return self._process


@contextlib.contextmanager
def running_server(
    *,
    startup_timeout_s: float = 60.0,
    data_dir: Path | None = None,
    log_dir: Path | None = None,
    wrap: Sequence[str] = (),
    **settings: object,
) -> Iterator[Server]:
    """A started server with `settings`; its data lives in `data_dir` (one prepared beforehand),
    else in a temporary folder, as do its logs unless `log_dir` says where. Stopped (SIGTERM, then
    SIGKILL after 30 s) on the way out."""
    with tempfile.TemporaryDirectory(prefix="yolo-orch-server-") as tmp:
        server = Server(
            data_dir if data_dir is not None else Path(tmp) / "var",
            log_dir if log_dir is not None else Path(tmp) / "logs",
            "server",
            **settings,
        )
        server.wrap = list(wrap)
        try:
            server.start(timeout=startup_timeout_s)
            yield server
        finally:
            if server.running:
                try:
                    server.stop(timeout=30)
                except TimeoutError:
                    server.kill()


def read_cpu_s(pid: int) -> float:
    """User and system CPU time of process `pid` so far (/proc/PID/stat), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of the whole line
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def read_rss_kib(pid: int) -> int:
    """Resident memory of process `pid` (VmRSS), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")
