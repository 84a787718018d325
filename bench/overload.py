"""Overload: a burst of 10 x max_queued submissions from 32 concurrent clients against a real
server (simulated runtime, SQLite). The excess must get 429 with Retry-After, memory must stay
bounded, /healthz must keep answering, and every accepted job must complete.

    python -m bench.overload [--max-queued 50] [--factor 10] [--clients 32]

`run_overload` is shared with tests/proof/test_overload.py.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench._server import percentile, read_rss_kib, running_server


@dataclass
class OverloadReport:
    submissions: int
    codes: Counter[int] = field(default_factory=Counter)
    retry_after: list[str] = field(default_factory=list)
    """The Retry-After header of every 429 ('' when missing)."""
    accepted: list[str] = field(default_factory=list)
    burst_s: float = 0.0
    health_ms: list[float] = field(default_factory=list)
    health_failures: int = 0
    rss_before_kib: int = 0
    rss_peak_kib: int = 0
    rss_after_kib: int = 0
    final_states: Counter[str] = field(default_factory=Counter)
    drain_s: float = 0.0


async def _burst(
    url: str, pid: int, submissions: int, clients: int, report: OverloadReport
) -> None:
    limits = httpx.Limits(max_connections=clients + 1, max_keepalive_connections=clients + 1)
    done = asyncio.Event()
    todo = iter(range(submissions))

    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:

        async def submit_loop() -> None:
            for i in todo:
                body = {
                    "kind": "inference",
                    "model": "sim",
                    "inputs": [f"burst-{i}.jpg"],
                    "params": {"sim_seconds": 0.1, "sim_steps": 2},
                }
                response = await client.post("/v1/jobs", json=body)
                report.codes[response.status_code] += 1
                if response.status_code == 202:
                    report.accepted.append(response.json()["id"])
                elif response.status_code == 429:
                    report.retry_after.append(response.headers.get("Retry-After", ""))

        async def health_loop() -> None:
            async with httpx.AsyncClient(base_url=url, timeout=5) as probe:
                while not done.is_set():
                    started = time.perf_counter()
                    try:
                        ok = (await probe.get("/healthz")).status_code == 200
                    except httpx.HTTPError:
                        ok = False
                    report.health_ms.append((time.perf_counter() - started) * 1000)
                    report.health_failures += not ok
                    report.rss_peak_kib = max(report.rss_peak_kib, read_rss_kib(pid))
                    await asyncio.sleep(0.01)

        health = asyncio.create_task(health_loop())
        started = time.perf_counter()
        await asyncio.gather(*(submit_loop() for _ in range(clients)))
        report.burst_s = time.perf_counter() - started
        done.set()
        await health


def run_overload(
    url: str, pid: int, *, submissions: int, clients: int = 32, drain_timeout_s: float = 120
) -> OverloadReport:
    report = OverloadReport(submissions)
    with httpx.Client(base_url=url, timeout=30) as client:
        for _ in range(20):  # warm the routes before the baseline
            client.get("/healthz")
            client.get("/v1/jobs", params={"limit": 1})
        report.rss_before_kib = read_rss_kib(pid)
        asyncio.run(_burst(url, pid, submissions, clients, report))
        started = time.monotonic()
        states: dict[str, str] = {}
        pending = list(report.accepted)
        while pending:
            if time.monotonic() - started > drain_timeout_s:
                raise TimeoutError(f"{len(pending)} accepted jobs not finished")
            job: dict[str, Any] = client.get(f"/v1/jobs/{pending[-1]}").json()
            if job["state"] in ("succeeded", "failed", "cancelled"):
                states[pending.pop()] = job["state"]
            else:
                time.sleep(0.05)
        report.drain_s = time.monotonic() - started
        report.final_states = Counter(states.values())
        report.rss_after_kib = read_rss_kib(pid)
    return report


def print_report(report: OverloadReport, max_queued: int, clients: int) -> None:
    retry = Counter(report.retry_after)
    health = report.health_ms
    print(f"max_queued {max_queued}: {report.submissions} submissions from {clients} clients")
    print(f"answers: {dict(sorted(report.codes.items()))}; Retry-After values: {dict(retry)}")
    print(f"burst {report.burst_s:.2f} s ({report.submissions / report.burst_s:.0f} req/s)")
    print(
        f"/healthz during the burst: {len(health)} probes, {report.health_failures} failed, "
        f"p50 {percentile(health, 0.5):.1f} ms, p99 {percentile(health, 0.99):.1f} ms, "
        f"max {max(health):.1f} ms"
    )
    print(
        f"RSS: before {report.rss_before_kib / 1024:.1f} MiB, peak {report.rss_peak_kib / 1024:.1f}"
        f" MiB, after {report.rss_after_kib / 1024:.1f} MiB"
    )
    print(f"accepted jobs: {dict(report.final_states)} ({report.drain_s:.1f} s to finish)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-queued", type=int, default=50)
    parser.add_argument("--factor", type=int, default=10)
    parser.add_argument("--clients", type=int, default=32)
    args = parser.parse_args()
    with running_server(max_queued=args.max_queued, sim_lanes=2) as server:
        report = run_overload(
            server.url, server.pid, submissions=args.max_queued * args.factor, clients=args.clients
        )
    print_report(report, args.max_queued, args.clients)


if __name__ == "__main__":
    main()
