"""Run the real `yolo-orch serve` as a subprocess and talk to it over HTTP.

Every wait has a deadline and every process a test starts is killed in teardown. Each start of a
server writes its stderr to its own file; when a test fails, the tails of those files are printed
in the report ("Captured stderr teardown").
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

TERMINAL = frozenset({"succeeded", "failed", "cancelled"})
STARTUP_TIMEOUT_S = 20.0
LOG_TAIL_CHARS = 6000


def free_port() -> int:
    """A port nobody listens on right now (the kernel's choice for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class CheckFailed(AssertionError):
    """A harness check that failed: raised by `require`, which, unlike `assert`, still checks
    under `python -O` (bench.chaos runs these checks outside pytest)."""


def require(condition: object, message: object = "check failed") -> None:
    if not condition:
        raise CheckFailed(str(message))


class ServerExited(RuntimeError):
    """The server process ended while a test waited for it to answer."""


class Server:
    """One `yolo-orch serve` on a fixed loopback port and data directory; it may be started,
    stopped, killed and started again any number of times (each start logs to its own file)."""

    def __init__(
        self, data_dir: Path, log_dir: Path, name: str = "server", **settings: object
    ) -> None:
        self.data_dir = data_dir
        self.wrap: list[str] = []
        """A command the server runs under (`prlimit ... --`)."""
        self.log_dir = log_dir
        self.name = name
        self.port = free_port()
        self.settings: dict[str, object] = {
            "runtime": "simulated",
            "sim_lanes": 2,
            "log_level": "info",
            **settings,
        }
        self.starts = 0
        self.log_paths: list[Path] = []
        self._process: subprocess.Popen[bytes] | None = None

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

    def env(self) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith("YOLO_ORCH_")  # the test decides every setting
        }
        env.update({f"YOLO_ORCH_{key.upper()}": str(value) for key, value in self.settings.items()})
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
                        return
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{self.name} did not answer /healthz within {timeout}s")
                time.sleep(0.05)

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
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(10)

    def _require_process(self) -> subprocess.Popen[bytes]:
        if self._process is None:
            raise RuntimeError(f"{self.name} was never started")
        return self._process


ServerFactory = Callable[..., Server]


@contextlib.contextmanager
def module_server(factory: pytest.TempPathFactory, name: str) -> Iterator[Server]:
    """A started simulated server in a folder of its own, for a module's tests to share."""
    base = factory.mktemp(name)
    served = Server(base / "data", base / "logs", name, log_level="warning")
    served.start()
    try:
        yield served
    finally:
        served.cleanup()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed:
        item.stash[_FAILED] = True
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def server_factory(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ServerFactory]:
    """`server_factory(name=..., data_dir=..., **settings)`: a `Server` (not started yet) with
    its own data directory unless one is given. All of them are killed at teardown."""
    servers: list[Server] = []

    def make(
        name: str = "server",
        data_dir: Path | None = None,
        wrap: Sequence[str] = (),
        **settings: object,
    ) -> Server:
        data = data_dir or tmp_path / f"{name}-data"
        server = Server(data, tmp_path / "logs", name, **settings)
        server.wrap = list(wrap)
        servers.append(server)
        return server

    try:
        yield make
    finally:
        for server in servers:
            server.cleanup()
        if request.node.stash.get(_FAILED, False):
            for server in servers:
                for path in server.log_paths:
                    text = path.read_text(errors="replace") if path.exists() else "(no log)"
                    print(f"===== {path.name} (tail) =====", file=sys.stderr)
                    print(text[-LOG_TAIL_CHARS:], file=sys.stderr)


def wait_for(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    """Call `check` until it returns something truthy, and return that; `TimeoutError` naming
    `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def list_all_jobs(client: httpx.Client, page_size: int = 50) -> list[dict[str, Any]]:
    """Every job, newest first, following `next_cursor` across pages."""
    jobs: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(10_000):  # a bound: a cursor loop must not spin forever
        params: dict[str, str | int] = {"limit": page_size}
        if cursor is not None:
            params["cursor"] = cursor
        response = client.get("/v1/jobs", params=params)
        assert response.status_code == 200, response.text
        page = response.json()
        assert len(page["jobs"]) <= page_size
        jobs.extend(page["jobs"])
        cursor = page["next_cursor"]
        if cursor is None:
            ids = [job["id"] for job in jobs]
            assert len(ids) == len(set(ids)), "a job appeared on two pages"
            return jobs
    raise AssertionError("pagination did not end")


def get_job(client: httpx.Client, job_id: str) -> dict[str, Any]:
    response = client.get(f"/v1/jobs/{job_id}")
    assert response.status_code == 200, response.text
    job: dict[str, Any] = response.json()
    return job


def wait_terminal(client: httpx.Client, job_id: str, timeout: float) -> dict[str, Any]:
    job: dict[str, Any] = wait_for(
        lambda: (job := get_job(client, job_id))["state"] in TERMINAL and job,
        timeout,
        f"job {job_id} to end",
    )
    return job


def submit(client: httpx.Client, body: dict[str, Any], **headers: str) -> dict[str, Any]:
    response = client.post("/v1/jobs", json=body, headers=headers)
    assert response.status_code == 202, response.text
    job: dict[str, Any] = response.json()
    return job


def sim_inference(tag: str, priority: int = 0, **params: object) -> dict[str, Any]:
    """A simulated inference job; `tag` becomes its one input, so the job can be told apart."""
    return {
        "kind": "inference",
        "model": "sim",
        "inputs": [tag],
        "priority": priority,
        "params": params,
    }


def sim_training(tag: str, priority: int = 0, gpus: int = 1, **params: object) -> dict[str, Any]:
    """A simulated training job; `tag` becomes its dataset, so the job can be told apart."""
    return {
        "kind": "training",
        "model": "sim",
        "dataset": tag,
        "gpus": gpus,
        "priority": priority,
        "params": params,
    }


def sim_runs(data_dir: Path, job_id: str) -> list[int]:
    """The attempts that ran to success, in order, from the job's `sim-runs.log`."""
    path = data_dir / "jobs" / job_id / "sim-runs.log"
    if not path.exists():
        return []
    attempts = []
    for line in path.read_text().splitlines():
        words = line.split()
        well_formed = len(words) == 3 and words[0] == "attempt" and words[2] == "succeeded"
        require(well_formed, f"{path}: unexpected line {line!r}")
        attempts.append(int(words[1]))
    return attempts


def db_job(data_dir: Path, job_id: str) -> tuple[str, int]:
    """(state, attempt) of a job read straight from the database of a stopped server."""
    with contextlib.closing(sqlite3.connect(data_dir / "yolo-orch.db")) as db:
        row = db.execute("SELECT state, attempt FROM jobs WHERE id = ?", (job_id,)).fetchone()
    assert row is not None, f"job {job_id} is not in the database"
    return str(row[0]), int(row[1])


def ray_settings(cluster: Any) -> dict[str, object]:
    """Server settings for the Ray executor on `cluster`, in a namespace of its own (its lane
    and job actors are its own, and a restart of the same server finds them)."""
    return {
        "executor": "ray",
        "ray_address": cluster.address,
        "ray_poll_interval_s": 0.2,
        "ray_namespace": f"test-{uuid.uuid4().hex}",
    }


@pytest.fixture(params=["threads", pytest.param("ray", marks=pytest.mark.ray)])
def executor_settings(request: pytest.FixtureRequest) -> dict[str, object]:
    """Server settings for each executor an acceptance test runs against: this host's
    threads, and a Ray cluster of 2 nodes x 2 logical GPUs (`tests/on_ray`)."""
    if request.param == "threads":
        return {"executor": "threads"}
    return ray_settings(request.getfixturevalue("cluster"))
