"""What the benchmarks add to the real-server harness (`yolo_orch.testing`): a server with the
benchmarks' defaults and a warning where the file system would skew the figures, and the
submission and percentile helpers their reports share."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx

from yolo_orch.testing import Server
from yolo_orch.testing import running_server as harness_server


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
) -> Iterator[Server]:
    """A started server with `settings` (the simulated runtime unless `runtime` says otherwise);
    its data lives in `data_dir` (one prepared beforehand), else in a temporary folder. `wrap`
    runs it under a command (`prlimit ... --`). `BENCH_SERVER_LOG` names a folder to keep its
    logs in."""
    warn_if_unjournaled(os.path.realpath(data_dir.parent if data_dir else tempfile.gettempdir()))
    logs = os.environ.get("BENCH_SERVER_LOG")
    with harness_server(
        startup_timeout_s=startup_timeout_s,
        data_dir=data_dir,
        log_dir=Path(logs) if logs else None,
        wrap=wrap,
        log_level=log_level,
        **settings,
    ) as server:
        yield server


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
