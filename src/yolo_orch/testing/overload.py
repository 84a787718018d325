"""Overload: a burst of submissions far past `max_queued` from many concurrent clients against a
real server, with /healthz probed and the server's memory sampled throughout, then every accepted
job waited for. `python -m bench.overload` prints the figures; tests/proof/test_overload.py asserts
on them (the excess refused with 429 and a Retry-After, memory bounded, every accepted job done).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

from yolo_orch.testing.jobs import TERMINAL_STATES
from yolo_orch.testing.server import read_rss_kib


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
            if job["state"] in TERMINAL_STATES:
                states[pending.pop()] = job["state"]
            else:
                time.sleep(0.05)
        report.drain_s = time.monotonic() - started
        report.final_states = Counter(states.values())
        report.rss_after_kib = read_rss_kib(pid)
    return report
