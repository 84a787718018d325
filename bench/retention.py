"""A retention run against a real server: a database of finished jobs (built with SQL in the
store's own schema, each with a folder of files), all past `retention_days`, expired by the
server's background pass at start while `/healthz` is probed back to back.

    python -m bench.retention [--jobs 3000] [--file-kib 16]

Prints the jobs expired and the bytes freed (from `/metrics`), how long the pass took, and the
`/healthz` latency during it against the same server once it is idle.
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import tempfile
import threading
import time
from pathlib import Path

import httpx

from bench._server import percentile, running_server
from bench.history import build_database
from bench.loop_health import probe

_EXPIRED = re.compile(r'^yolo_orch_removed_jobs_total\{reason="expired"\} (\S+)$', re.M)
_FREED = re.compile(r'^yolo_orch_removed_bytes_total\{reason="expired"\} (\S+)$', re.M)


def make_job_folders(data_dir: Path, file_kib: int) -> int:
    """A result and an input of `file_kib` KiB for every job in the database; the bytes."""
    conn = sqlite3.connect(data_dir / "yolo-orch.db")
    try:
        job_ids = [row[0] for row in conn.execute("SELECT id FROM jobs")]
    finally:
        conn.close()
    data = b"x" * (file_kib * 1024)
    for job_id in job_ids:
        folder = data_dir / "jobs" / job_id
        (folder / "inputs").mkdir(parents=True)
        (folder / "result.json").write_bytes(data)
        (folder / "inputs" / "00000.jpg").write_bytes(data)
    return 2 * len(data) * len(job_ids)


def _metric(client: httpx.Client, pattern: re.Pattern[str]) -> float:
    found = pattern.search(client.get("/metrics").text)
    return float(found.group(1)) if found else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--file-kib", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="yolo-orch-retention-") as tmp:
        data_dir = Path(tmp) / "var"
        build_database(data_dir, finished=args.jobs, queued=0)
        on_disk = make_job_folders(data_dir, args.file_kib)
        with (
            running_server(data_dir=data_dir, retention_days=30, retention_interval_s=3600) as srv,
            httpx.Client(base_url=srv.url) as client,
            httpx.Client(base_url=srv.url) as watcher,
        ):
            at_first_probe = _metric(watcher, _EXPIRED)
            done = threading.Event()

            def watch() -> None:
                while _metric(watcher, _EXPIRED) < args.jobs:
                    time.sleep(0.05)
                done.set()

            threading.Thread(target=watch, daemon=True).start()
            started = time.perf_counter()
            during: list[float] = []
            while not done.is_set():
                during.extend(probe(client, 20))
            pass_s = time.perf_counter() - started
            expired, freed = _metric(client, _EXPIRED), _metric(client, _FREED)
            left = client.get("/v1/jobs", params={"limit": 1}).json()["jobs"]
            idle = probe(client, 1000)
    print(
        f"jobs expired: {expired:.0f} of {args.jobs} (left: {len(left)}); bytes freed: "
        f"{freed:.0f} of {on_disk} on disk; {at_first_probe:.0f} expired before the first "
        f"probe; the rest in {pass_s:.2f} s"
    )
    print(f"{'/healthz':>10} {'probes':>7} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7}")
    for label, samples in (("during", during), ("idle", idle)):
        print(
            f"{label:>10} {len(samples):>7} {percentile(samples, 0.5):>7.2f} "
            f"{percentile(samples, 0.99):>7.2f} {max(samples):>7.2f}"
        )


if __name__ == "__main__":
    main()
