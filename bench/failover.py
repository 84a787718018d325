"""Takeover time of a standby head (issue 42): two heads share a PostgreSQL database (fsync on) and
a data directory; while 4 clients submit to both, the active one is SIGKILLed `--kills` times
(its session ends: the standby takes the lease at its next poll) and SIGSTOPped `--pauses` times
(a host lost or hung: the standby waits for the lease to expire, `head_lease_timeout_s`, then
ends the old head's sessions). Each time: seconds from the signal to the standby answering
`/readyz` ready (recovery run). The killed or paused head is started again as the new standby.

The baseline, in the same run: one server on SQLite, SIGKILLed and started again at once (a
supervisor restarting it with no delay): seconds from the kill to `/readyz` ready.

At the end the whole queue is checked (`yolo_orch.testing.chaos.check_total_queue`): every
acknowledged job present and ended, none twice.

    python -m bench.failover [--kills 20] [--pauses 3] [--restarts 5] [--lease-timeout 5]

Run it with TMPDIR on a journaled file system (BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import signal
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from yolo_orch.testing import Server
from yolo_orch.testing.chaos import Submitter, check_total_queue, submission
from yolo_orch.testing.jobs import list_jobs, wait_all_terminal
from yolo_orch.testing.postgres import PostgresCluster

CLIENTS = 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--pauses", type=int, default=3)
    parser.add_argument("--restarts", type=int, default=5, help="of the SQLite baseline")
    parser.add_argument("--lease-timeout", type=float, default=5.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="yolo-orch-failover-") as tmp:
        root = Path(tmp)
        restarts = restart_baseline(root / "sqlite", args.restarts)
        cluster = PostgresCluster(fsync=True)
        try:
            cluster.start()
            kills, pauses, outcomes = failovers(
                root / "heads", cluster, args.kills, args.pauses, args.lease_timeout
            )
        finally:
            cluster.stop()
    print(f"lease timeout {args.lease_timeout} s; submissions {dict(outcomes)}")
    print("| what | n | p50 s | p99 s | max s |")
    print("|---|---|---|---|---|")
    for name, times in (
        ("takeover after SIGKILL of the active", kills),
        ("takeover after SIGSTOP of the active", pauses),
        ("baseline: SQLite server SIGKILLed, restarted", restarts),
    ):
        if times:
            print(
                f"| {name} | {len(times)} | {p(times, 50):.2f} | {p(times, 99):.2f} | "
                f"{max(times):.2f} |"
            )
    if kills and restarts:
        print(f"takeover / restart (p50): {p(kills, 50) / p(restarts, 50):.2f}")
    print("checker: every acknowledged job present and ended, none twice: OK")


def p(times: list[float], percent: int) -> float:
    if len(times) == 1:
        return times[0]
    return statistics.quantiles(times, n=100, method="inclusive")[percent - 1]


def ready_after(server: Server, since: float, timeout: float = 60) -> float:
    """Seconds from `since` until `server` answers /readyz ready."""
    with httpx.Client(base_url=server.url, timeout=1.0) as client:
        while time.monotonic() - since < timeout:
            try:
                if client.get("/readyz").json().get("status") == "ready":
                    return time.monotonic() - since
            except (httpx.TransportError, ValueError):
                pass
            time.sleep(0.005)
    raise TimeoutError(f"{server.name} was not ready {timeout} s after the signal")


def restart_baseline(root: Path, restarts: int) -> list[float]:
    server = Server(root / "var", root / "logs", "sqlite", sim_lanes=2)
    server.start()
    times = []
    try:
        for _ in range(restarts):
            since = time.monotonic()
            server.kill()
            server.start(wait_ready=False)
            times.append(ready_after(server, since))
    finally:
        server.cleanup()
    return times


def failovers(
    root: Path, cluster: PostgresCluster, kills: int, pauses: int, lease_timeout_s: float
) -> tuple[list[float], list[float], Counter[str]]:
    database = cluster.url("failover")
    cluster.sql("CREATE DATABASE failover")
    made = []
    for name in ("a", "b"):
        head = Server(
            root / "var",
            root / "logs",
            name,
            database_url=database,
            head_lease_timeout_s=lease_timeout_s,
            sim_lanes=2,
            max_attempts=kills + pauses + 2,
        )
        head.settings["head_url"] = head.url
        made.append(head)
    active, standby = made
    submissions = [submission(i) for i in range(100_000)]
    submitter = Submitter(active, submissions, urls=[head.url for head in made], pace_s=0.2)
    kill_times: list[float] = []
    pause_times: list[float] = []
    try:
        active.start()
        standby.start()
        with ThreadPoolExecutor(CLIENTS) as pool:
            clients = [pool.submit(submitter.run_client) for _ in range(CLIENTS)]
            signals: list[tuple[Callable[[Server], None], list[float]]] = [
                (lambda head: head.send(signal.SIGKILL), kill_times)
            ] * kills + [(lambda head: head.send(signal.SIGSTOP), pause_times)] * pauses
            for stop, times in signals:
                time.sleep(0.5)  # jobs running and clients submitting when the signal comes
                since = time.monotonic()
                stop(active)
                times.append(ready_after(standby, since))
                active.kill()  # a paused one too
                active.start()
                active, standby = standby, active
            submitter.stop()
            for future in clients:
                future.result()
        with active.client() as client:
            wait_all_terminal(client, timeout=300)
            jobs = list_jobs(client)
        check_total_queue(active, submissions, jobs)
    finally:
        for head in made:
            head.cleanup()
    outcomes = Counter[str](item.outcome for item in submissions if item.outcome != "pending")
    return kill_times, pause_times, outcomes


if __name__ == "__main__":
    main()
