"""Crash harness: cycles of submitting jobs while the server is killed with SIGKILL at a random
moment and restarted; at the end, the whole queue is checked like Jepsen's total-queue checker
(every acknowledged job present and terminal, none that no client submitted, none that ran to
success twice in one attempt): `check_total_queue` of tests/acceptance/test_crash_recovery.py.

    python -m bench.chaos [--cycles 50] [--jobs 200] [--clients 4] [--seed 1]

Simulated runtime, SQLite (synchronous=FULL), 2 lanes, max_attempts 3. Jobs are the crash
test's mix (inference; training on 1 or 2 lanes; three priorities; 0.05 s each), so the backlog
carries over from one cycle to the next and kills land while jobs run, while clients submit, or
both. A job killed mid-run max_attempts times ends `failed`/`interrupted`, which the checker
allows. The short CI version is tests/proof/test_chaos.py.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench._server import list_jobs
from tests.acceptance.conftest import Server, require
from tests.acceptance.test_crash_recovery import (
    Submission,
    Submitter,
    check_total_queue,
    submission,
)

TERMINAL = frozenset({"succeeded", "failed", "cancelled"})


@dataclass
class ChaosReport:
    cycles: int
    submissions: int
    outcomes: Counter[str] = field(default_factory=Counter)
    states: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    kills: int = 0
    acked_at_kill: list[int] = field(default_factory=list)
    """Per cycle: submissions of that cycle acknowledged when the kill came."""
    running_at_kill: int = 0
    """Cycles whose kill found at least one job running (the latest poll before it)."""
    seconds: float = 0.0
    drain_seconds: float = 0.0


def run_chaos(
    data_dir: Path,
    log_dir: Path,
    *,
    cycles: int,
    jobs: int,
    clients: int = 4,
    seed: int = 1,
    max_kill_delay_s: float = 1.5,
    drain_timeout_s: float = 600,
    **settings: object,
) -> tuple[ChaosReport, Server]:
    """Run the cycles, then check the queue (raises `CheckFailed`, an AssertionError, on a
    violation; the checks are calls, not `assert`s, so `python -O` keeps them). Returns the
    report and the server (stopped)."""
    rng = random.Random(seed)
    server = Server(
        data_dir,
        log_dir,
        "chaos",
        sim_lanes=2,
        max_attempts=3,
        max_queued=cycles * jobs + 100,
        log_level="warning",
        **settings,
    )
    started = time.monotonic()
    report = ChaosReport(cycles, cycles * jobs)
    submissions: list[Submission] = []
    server.start()
    try:
        for cycle in range(cycles):
            batch = [submission(cycle * jobs + i) for i in range(jobs)]
            submissions.extend(batch)
            submitter = Submitter(server, batch)
            with ThreadPoolExecutor(clients) as pool:
                futures = [pool.submit(submitter.run_client) for _ in range(clients)]
                time.sleep(rng.uniform(0, max_kill_delay_s))
                report.running_at_kill += _any_running(server)
                report.acked_at_kill.append(submitter.acked)
                code = server.kill()
                require(code == -9, f"the server had exited ({code}) before the kill")
                report.kills += 1
                server.start()
                for future in futures:
                    future.result(timeout=120)

        drain_started = time.monotonic()
        with server.client(timeout=30) as client:
            listed = _wait_all_terminal(client, drain_timeout_s)
        report.drain_seconds = time.monotonic() - drain_started
        report.outcomes = Counter(item.outcome for item in submissions)
        report.states = Counter(str(job["state"]) for job in listed)
        report.errors = Counter(
            str(job["error"]["code"]) for job in listed if job["state"] == "failed"
        )
        report.seconds = time.monotonic() - started
        pending = [item.index for item in submissions if item.outcome == "pending"]
        require(pending == [], f"submissions never sent: {pending[:10]}")
        check_total_queue(server, submissions, listed)
    finally:
        if server.running:
            server.stop()
    return report, server


def _any_running(server: Server) -> bool:
    try:
        with server.client(timeout=1) as client:
            page = client.get("/v1/jobs", params={"state": "running", "limit": 1}).json()
    except httpx.HTTPError:
        return False
    return bool(page["jobs"])


def _wait_all_terminal(client: httpx.Client, timeout_s: float) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while True:
        active = client.get("/v1/jobs", params={"state": ["queued", "running"], "limit": 1}).json()[
            "jobs"
        ]
        if not active:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"jobs still active {timeout_s}s after the last cycle")
        time.sleep(0.2)
    jobs = list_jobs(client)
    active = [job["id"] for job in jobs if job["state"] not in TERMINAL]
    require(active == [], f"jobs listed as active after the queue drained: {active[:10]}")
    return jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cycles", type=int, default=50)
    parser.add_argument("--jobs", type=int, default=200, help="submissions per cycle")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="yolo-orch-chaos-") as tmp:
        report, _ = run_chaos(
            Path(tmp) / "var",
            Path(tmp) / "logs",
            cycles=args.cycles,
            jobs=args.jobs,
            clients=args.clients,
            seed=args.seed,
        )
    print_report(report)


def print_report(report: ChaosReport) -> None:
    acked = report.acked_at_kill
    print(f"cycles {report.cycles}, SIGKILLs {report.kills}, submissions {report.submissions}")
    print(f"kills with a job running: {report.running_at_kill}/{report.kills}")
    print(
        f"acked at the kill (this cycle's): min {min(acked)}, median "
        f"{sorted(acked)[len(acked) // 2]}, max {max(acked)}"
    )
    print(f"submission outcomes: {dict(report.outcomes)}")
    print(f"final job states: {dict(report.states)}; failures by code: {dict(report.errors)}")
    print(f"total {report.seconds:.0f} s (drain after the last cycle {report.drain_seconds:.0f} s)")
    print("checker: every acknowledged job present and terminal, none unexpected, none twice: OK")


if __name__ == "__main__":
    main()
