"""What a long history costs: a real server on a database of 1,000,000 finished jobs and 20,000
queued ones, built with SQL in the store's own schema, against the same server on an empty
database in the same run.

    python -m bench.history [--finished 1000000] [--queued 20000] [--submissions 2000]
                            [--starts 5]

Measured on each: start-up (process start to the first /healthz answer, and the lifespan part of
it from the server log; `--starts` times, taking turns with the other database), every list
filter (state, kind, both, several states, and pages further on through the cursor),
`/metrics`, submissions/s (8 clients), and the dispatcher's pick (`next_queued` over its window
with the aging and lane filter the dispatcher asks for, timed in this process on the same
database once the server has stopped). Targets (issue 12): lists and `/metrics` <= 50 ms,
submissions/s within 10 % of the empty database, start-up <= 2 s, the pick unchanged.

The servers run from bytecode, as an installed server does (pip compiles it): with
PYTHONDONTWRITEBYTECODE set, a checkout would compile the project's modules at every start.
Their bytecode goes to a cache folder of the run, written by a first server not measured.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import os
import re
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from bench._server import percentile, running_server, submit_all
from yolo_orch.config import Settings
from yolo_orch.domain import QueueOrder
from yolo_orch.ops.clock import utcnow
from yolo_orch.store.migrate import upgrade_to_head
from yolo_orch.store.sql_jobs import SqlJobStore
from yolo_orch.store.sqlite_db import SQLiteDatabase
from yolo_orch.testing import Server

LANES = 2
WINDOW = 2 * LANES + LANES
"""The dispatcher's window with one slot per lane (`Dispatcher`: 2 * slots + lanes)."""
AGING_PER_MINUTE: float = Settings.model_fields["priority_aging_per_minute"].default
"""The servers here run with the default aging, and so does the pick timed after them."""
REPEATS = 50
PAGES = 10
BLOCKER = {
    "kind": "inference",
    "model": "sim",
    "inputs": ["a.jpg"],
    "params": {"sim_seconds": 3600},
}
"""Keeps a lane busy for the whole run, so that in both runs what is submitted stays queued."""

_INFERENCE_SPEC = {
    "inputs": ["a.jpg"],
    "params": {"sim_seconds": 3600, "imgsz": 640, "conf": 0.25, "iou": 0.7, "max_det": 300},
    "files": [{"path": "a.jpg", "name": "a.jpg"}],
}
_TRAINING_SPEC = {
    "params": {"sim_seconds": 3600, "epochs": 100, "imgsz": 640, "batch": 16, "patience": 100},
    "dataset": "d/data.yaml",
    "files": [],
}
_INFERENCE_RESULT = {"images": 1, "detections": 3, "failed_images": 0}
_TRAINING_RESULT = {"epochs": 5, "metrics": {"mAP50": 0.6025}, "model_id": None}

# One INSERT ... SELECT over a counting CTE: the rows never pass through Python. Job i is
# training when i % 7 == 0 (a seventh, in every state); finished jobs are 85 % succeeded, 10 %
# failed, 5 % cancelled; each job was submitted a second after the one before, and ran for 2 s.
_BUILD = """
WITH RECURSIVE n(i) AS (SELECT :first UNION ALL SELECT i + 1 FROM n WHERE i < :last)
INSERT INTO jobs (id, kind, state, model, spec, priority, gpus, attempt, max_attempts, devices,
                  progress, error_code, error_message, result, cancel_requested,
                  request_fingerprint, created_at, started_at, finished_at)
SELECT printf('%08x-0000-4000-8000-%012x', i / 65536, i),
       CASE WHEN i % 7 = 0 THEN 'training' ELSE 'inference' END,
       CASE WHEN :queued THEN 'queued'
            WHEN i % 20 < 17 THEN 'succeeded' WHEN i % 20 < 19 THEN 'failed' ELSE 'cancelled' END,
       'sim',
       CASE WHEN i % 7 = 0 THEN :training_spec ELSE :inference_spec END,
       0, 1, CASE WHEN :queued THEN 0 ELSE 1 END, 3,
       CASE WHEN :queued THEN '[]' ELSE '["sim:0"]' END,
       CASE WHEN :queued THEN NULL ELSE '{"done": 5, "total": 5, "unit": "steps"}' END,
       CASE WHEN NOT :queued AND i % 20 IN (17, 18) THEN 'runtime_error' END,
       CASE WHEN NOT :queued AND i % 20 IN (17, 18) THEN 'simulated failure' END,
       CASE WHEN :queued OR i % 20 >= 17 THEN NULL
            WHEN i % 7 = 0 THEN :training_result ELSE :inference_result END,
       0,
       printf('%064x', i),
       strftime('%Y-%m-%dT%H:%M:%S.000000+00:00', :epoch + i, 'unixepoch'),
       CASE WHEN :queued THEN NULL
            ELSE strftime('%Y-%m-%dT%H:%M:%S.000000+00:00', :epoch + i + 1, 'unixepoch') END,
       CASE WHEN :queued THEN NULL
            ELSE strftime('%Y-%m-%dT%H:%M:%S.000000+00:00', :epoch + i + 3, 'unixepoch') END
FROM n
"""
_EPOCH = 1_700_000_000


def build_database(data_dir: Path, *, finished: int, queued: int) -> float:
    """The server's database in `data_dir`, at the head migration, holding `finished` finished
    jobs and then `queued` queued ones; returns the seconds it took."""
    started = time.perf_counter()
    path = data_dir / "yolo-orch.db"
    data_dir.mkdir(parents=True)
    upgrade_to_head(f"sqlite+aiosqlite:///{path}")
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=OFF")  # a bench fixture: nothing here must survive
        constants = {
            "epoch": _EPOCH,
            "inference_spec": json.dumps(_INFERENCE_SPEC),
            "training_spec": json.dumps(_TRAINING_SPEC),
            "inference_result": json.dumps(_INFERENCE_RESULT),
            "training_result": json.dumps(_TRAINING_RESULT),
        }
        conn.execute("BEGIN")
        if finished:
            conn.execute(_BUILD, {**constants, "first": 1, "last": finished, "queued": False})
        if queued:
            last = finished + queued
            conn.execute(_BUILD, {**constants, "first": finished + 1, "last": last, "queued": True})
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return time.perf_counter() - started


LISTS: list[tuple[str, dict[str, Any]]] = [
    ("all", {}),
    ("state=succeeded", {"state": "succeeded"}),
    ("state=failed", {"state": "failed"}),
    ("state=queued", {"state": "queued"}),
    ("state=queued,running", {"state": ["queued", "running"]}),
    ("kind=training", {"kind": "training"}),
    ("state=succeeded&kind=training", {"state": "succeeded", "kind": "training"}),
    (
        "state=failed,cancelled&kind=training",
        {"state": ["failed", "cancelled"], "kind": "training"},
    ),
]
CURSOR_WALKS: list[tuple[str, dict[str, Any]]] = [
    ("all", {}),
    ("state=succeeded", {"state": "succeeded"}),
    ("state=cancelled&kind=training", {"state": "cancelled", "kind": "training"}),
]

Row = tuple[str, float | None, float | None]
"""What was measured, its median and its 95th percentile (ms), or a rate twice; `None` where
there was nothing to measure (no second page on the empty database)."""


def _timed(call: Callable[[], httpx.Response], repeats: int = REPEATS) -> tuple[float, float]:
    """After one call not counted: it compiles the statement and reads the pages into memory."""
    call().raise_for_status()
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        call().raise_for_status()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples), percentile(samples, 0.95)


def _cursor_pages(
    client: httpx.Client, params: dict[str, Any]
) -> tuple[float | None, float | None]:
    """Pages 2 to PAGES + 1 (or the last), each reached with the previous page's cursor."""
    samples = []
    cursor = client.get("/v1/jobs", params={**params, "limit": 50}).json()["next_cursor"]
    if cursor is None:
        return None, None
    for _ in range(PAGES):
        started = time.perf_counter()
        response = client.get("/v1/jobs", params={**params, "limit": 50, "cursor": cursor})
        samples.append((time.perf_counter() - started) * 1000)
        cursor = response.raise_for_status().json()["next_cursor"]
        if cursor is None:
            break
    return statistics.median(samples), percentile(samples, 0.95)


_LOG_TIME = re.compile(
    r"^(\S+ \S+) INFO uvicorn\.error: (Waiting for application|Application) startup", re.M
)


def _lifespan_s(log: str) -> float:
    """From uvicorn's "Waiting for application startup" to "Application startup complete": the
    stores opened, the migrations checked, recovery and the lanes, without Python's imports."""
    began, ended = (
        datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f") for stamp, _ in _LOG_TIME.findall(log)
    )
    return (ended - began).total_seconds()


def _wait_running(client: httpx.Client, count: int) -> None:
    deadline = time.monotonic() + 30
    while len(client.get("/v1/jobs", params={"state": "running"}).json()["jobs"]) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{count} jobs did not start")
        time.sleep(0.05)


async def _pick_ms(path: Path) -> tuple[float, float]:
    """The read the dispatcher makes (`Dispatcher._dispatch`): its window, aged by the server's
    default rate, and only jobs that fit the healthy lanes."""
    db = SQLiteDatabase(f"sqlite+aiosqlite:///{path}")
    await db.open()
    try:
        store = SqlJobStore(db)
        samples = []
        for _ in range(REPEATS * 5):
            order = QueueOrder(utcnow(), AGING_PER_MINUTE, max_gpus=LANES)
            started = time.perf_counter()
            await store.next_queued(WINDOW, order)
            samples.append((time.perf_counter() - started) * 1000)
    finally:
        await db.close()
    return statistics.median(samples), percentile(samples, 0.95)


def _server(data_dir: Path) -> contextlib.AbstractContextManager[Server]:
    return running_server(
        data_dir=data_dir,
        sim_lanes=LANES,
        max_queued=10_000_000,
        shutdown_grace_s=0,
        log_level="info",  # for the lifespan's start and end in the log
    )


def start_ups(data_dirs: list[Path], starts: int) -> list[list[Row]]:
    """Start-up on each database, `starts` times in turn (so that the load of the machine
    falls on each alike): the median and the slowest, in seconds, in the server's CPU seconds
    (what a loaded machine stretches least), and of the lifespan in ms."""
    seconds: list[list[float]] = [[] for _ in data_dirs]
    cpu: list[list[float]] = [[] for _ in data_dirs]
    lifespans: list[list[float]] = [[] for _ in data_dirs]
    for _ in range(starts):
        for data_dir, times, used, lifespan in zip(data_dirs, seconds, cpu, lifespans, strict=True):
            with _server(data_dir) as server:
                times.append(server.startup_s)
                used.append(server.startup_cpu_s)
                lifespan.append(_lifespan_s(server.log_path.read_text()) * 1000)
    return [
        [
            (f"start-up (s, median and slowest of {starts})", statistics.median(t), max(t)),
            ("  its CPU time (s)", statistics.median(c), max(c)),
            ("  of which the app's lifespan", statistics.median(ms), max(ms)),
        ]
        for t, c, ms in zip(seconds, cpu, lifespans, strict=True)
    ]


def measure(data_dir: Path, submissions: int, clients: int) -> list[Row]:
    rows: list[Row] = []
    with _server(data_dir) as server:
        with httpx.Client(base_url=server.url, timeout=60) as client:
            for _ in range(LANES):
                client.post("/v1/jobs", json=BLOCKER).raise_for_status()
            _wait_running(client, LANES)
            for name, params in LISTS:
                rows.append(
                    (f"GET /v1/jobs?{name}", *_timed(functools.partial(_list, client, params)))
                )
            for name, params in CURSOR_WALKS:
                rows.append((f"  pages 2-{PAGES + 1} of {name}", *_cursor_pages(client, params)))
            rows.append(("GET /metrics", *_timed(lambda: client.get("/metrics"))))
        elapsed, _ = asyncio.run(submit_all(server.url, submissions, clients))
        rate = submissions / elapsed
        rows.append((f"POST /v1/jobs ({clients} clients, jobs/s)", rate, rate))
    rows.append(
        (
            f"dispatcher pick: aged next_queued({WINDOW})",
            *asyncio.run(_pick_ms(data_dir / "yolo-orch.db")),
        )
    )
    return rows


def _list(client: httpx.Client, params: dict[str, Any]) -> httpx.Response:
    return client.get("/v1/jobs", params={**params, "limit": 50})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--finished", type=int, default=1_000_000)
    parser.add_argument("--queued", type=int, default=20_000)
    parser.add_argument("--submissions", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--starts", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="yolo-orch-history-") as tmp:
        _run_from_bytecode(Path(tmp) / "pycache")
        empty, history = Path(tmp) / "empty", Path(tmp) / "history"
        build_database(empty, finished=0, queued=0)
        built_s = build_database(history, finished=args.finished, queued=args.queued)
        size_mib = (history / "yolo-orch.db").stat().st_size / 2**20
        print(
            f"history: {args.finished:,} finished + {args.queued:,} queued jobs, built in "
            f"{built_s:.0f} s ({size_mib:.0f} MiB)"
        )
        empty_starts, history_starts = start_ups([empty, history], args.starts)
        baseline = empty_starts + measure(empty, args.submissions, args.clients)
        loaded = history_starts + measure(history, args.submissions, args.clients)
    print(
        f"| {'measured (ms unless said)':<44} | empty p50 | empty p95 | history p50 | history p95 |"
    )
    print(f"|{'-' * 46}|----------:|----------:|------------:|------------:|")
    for (name, *empty_ms), (_, *history_ms) in zip(baseline, loaded, strict=True):
        e50, e95, h50, h95 = (_cell(value) for value in (*empty_ms, *history_ms))
        print(f"| {name:<44} | {e50:>9} | {e95:>9} | {h50:>11} | {h95:>11} |")


def _run_from_bytecode(cache: Path) -> None:
    """Servers started from here on read their bytecode from `cache`, which a first server,
    not measured, fills."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(cache)
    with running_server(sim_lanes=LANES, shutdown_grace_s=0, startup_timeout_s=600):
        pass


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


if __name__ == "__main__":
    main()
