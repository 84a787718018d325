"""Start a real `yolo-orch serve` subprocess for a benchmark, on a free loopback port."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class BenchServer:
    url: str
    pid: int
    data_dir: Path
    log_path: Path
    startup_s: float
    """From starting the process to its first answer on /healthz."""
    startup_cpu_s: float = 0.0
    """The CPU time the process had used by then: what start-up costs, whatever the load."""

    def rss_kib(self) -> int:
        """Resident memory of the server process (VmRSS), in KiB."""
        return read_rss_kib(self.pid)


def read_cpu_s(pid: int) -> float:
    """User and system CPU time of process `pid` so far (/proc/PID/stat), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of the whole line
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def read_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def _env_value(value: object) -> str:
    # Lists (lanes, data_roots, model_roots) and tables (batch_max_images) are read from the
    # environment as JSON.
    if isinstance(value, list | tuple):
        return json.dumps([str(item) for item in value])
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


@functools.cache
def warn_if_unjournaled(folder: str) -> None:
    """Say so, once, when the servers' data would live on ext4 without a journal. There ext4
    reuses no inode deleted in the last minutes (its `recently_deleted` check), and checks
    every candidate it passes: once a run's folders are deleted, the job folders and logs of
    the runs that follow are made several times slower (measured here: 3,000 zero-second jobs
    drained at 521/s on a fresh file system, then at 416 down to 111/s in the six runs after).
    Production file systems keep a journal; set TMPDIR to a folder on one (BENCHMARKS.md)."""
    mounts = Path("/proc/self/mountinfo")
    if not mounts.exists():
        return
    best: tuple[str, str, str] = ("", "", "")
    for line in mounts.read_text().splitlines():
        fields, _, rest = line.partition(" - ")
        mount_point = fields.split()[4]
        fs_type, source = rest.split()[:2]
        inside = folder == mount_point or folder.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) > len(best[0]):
            best = (mount_point, fs_type, source)
    mount_point, fs_type, source = best
    if fs_type == "ext4" and not Path(f"/proc/fs/jbd2/{Path(source).name}-8").exists():
        print(
            f"warning: {folder} is on ext4 without a journal ({source} at {mount_point}): file "
            "creation slows after deletes, and the figures with it; see BENCHMARKS.md",
            file=sys.stderr,
        )


@contextlib.contextmanager
def running_server(
    *,
    startup_timeout_s: float = 60.0,
    log_level: str = "warning",
    data_dir: Path | None = None,
    wrap: Sequence[str] = (),
    **settings: object,
) -> Iterator[BenchServer]:
    """A server with `settings` (the simulated runtime unless `runtime` says otherwise); its data
    lives in `data_dir` (one prepared beforehand), else in a temporary folder. `wrap` runs it
    under a command (`prlimit ... --`). `BENCH_SERVER_LOG` names a file to keep its log in."""
    with tempfile.TemporaryDirectory(prefix="yolo-orch-bench-") as tmp:
        port = free_port()
        data_dir = data_dir if data_dir is not None else Path(tmp) / "var"
        warn_if_unjournaled(os.path.realpath(data_dir.parent))
        env = {key: value for key, value in os.environ.items() if not key.startswith("YOLO_ORCH_")}
        env.update({"YOLO_ORCH_RUNTIME": "simulated", "YOLO_ORCH_LOG_LEVEL": log_level})
        env.update(
            {f"YOLO_ORCH_{key.upper()}": _env_value(value) for key, value in settings.items()}
        )
        env.update(YOLO_ORCH_DATA_DIR=str(data_dir), YOLO_ORCH_PORT=str(port))
        log_path = Path(os.environ.get("BENCH_SERVER_LOG", Path(tmp) / "server.log"))
        with log_path.open("w") as log:
            started = time.perf_counter()
            process = subprocess.Popen(
                [*wrap, sys.executable, "-m", "yolo_orch.cli", "serve"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + startup_timeout_s
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                        startup_s = time.perf_counter() - started
                        startup_cpu_s = read_cpu_s(process.pid)
                        break
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"server did not start:\n{log_path.read_text(errors='replace')[-4000:]}"
                    )
                time.sleep(0.02)
            yield BenchServer(url, process.pid, data_dir, log_path, startup_s, startup_cpu_s)
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


SIM_JOB = {"kind": "inference", "model": "sim", "inputs": ["a.jpg"], "params": {"sim_seconds": 0}}


async def submit_all(url: str, jobs: int, clients: int) -> tuple[float, list[float]]:
    """POST `jobs` copies of `SIM_JOB` from `clients` concurrent httpx clients in this process;
    the seconds it took and each submission's latency."""
    latencies: list[float] = []
    remaining = iter(range(jobs))
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async def client_loop(client: httpx.AsyncClient) -> None:
        for _ in remaining:
            started = time.perf_counter()
            response = await client.post("/v1/jobs", json=SIM_JOB)
            latencies.append(time.perf_counter() - started)
            if response.status_code != 202:
                raise RuntimeError(f"{response.status_code}: {response.text}")

    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as client:
        started = time.perf_counter()
        await asyncio.gather(*(client_loop(client) for _ in range(clients)))
        return time.perf_counter() - started, latencies


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def wait_all_terminal(client: httpx.Client, timeout_s: float, interval_s: float = 0.2) -> None:
    """Until no job is queued or running."""
    deadline = time.monotonic() + timeout_s
    while True:
        active = client.get("/v1/jobs", params={"state": ["queued", "running"], "limit": 1}).json()[
            "jobs"
        ]
        if not active:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"jobs still active after {timeout_s}s")
        time.sleep(interval_s)


def list_jobs(client: httpx.Client) -> list[dict[str, Any]]:
    """Every job, newest first."""
    jobs: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params: dict[str, str | int] = {"limit": 500}
        if cursor is not None:
            params["cursor"] = cursor
        page = client.get("/v1/jobs", params=params).json()
        jobs.extend(page["jobs"])
        cursor = page["next_cursor"]
        if cursor is None:
            return jobs
