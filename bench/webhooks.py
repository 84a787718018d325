"""Webhooks: how soon an event reaches its receiver, and what the outbox costs submissions.

Latency: simulated zero-second jobs submitted at `--rate` jobs/s (open loop: each at its own
time, whatever the answers before it), each with a webhook to a loopback receiver in this
process that verifies every signature (`yolo_orch.testing.webhooks`); an event's latency runs
from the change that made it (the payload's `timestamp`, taken in the write that commits it)
to its receipt. Every event is delivered; the table says how many came twice (none should).

Cost: `bench.submit`'s `wrk` run (32 connections, the jobs running beside) against a fresh
server without webhooks, one with a webhook on every job for all its events, and one for its
end only, in turn, `--runs` times; the ratios of their submissions/s (target >= 0.8). The
deliveries run in the same process as the submissions, so the ratio counts their CPU time.

    python -m bench.webhooks [--rate 100] [--seconds 20] [--duration 10] [--runs 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from datetime import datetime
from typing import Any

import httpx

from bench._server import SIM_JOB, percentile, running_server
from bench.submit import cpu_seconds, wrk
from yolo_orch.testing.webhooks import WebhookReceiver, new_secret

LANES = 2
EVENTS_PER_JOB = 3
"""queued, started, succeeded: a zero-second job reports no progress."""


def server_settings(secret: str | None, concurrency: int | None = None) -> dict[str, Any]:
    settings: dict[str, Any] = {"max_queued": 10_000_000, "sim_lanes": LANES}
    if secret is not None:
        settings |= {"webhook_secrets": [secret], "webhook_allowed_hosts": ["127.0.0.1"]}
    if concurrency is not None:
        settings["webhook_concurrency"] = concurrency
    return settings


async def submit_at_rate(url: str, job: dict[str, Any], rate: float, seconds: float) -> int:
    """POST `job` at `rate` per second for `seconds`, open loop; how many were accepted."""
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as client:

        async def post_at(at: float) -> int:
            await asyncio.sleep(max(0.0, at - time.perf_counter()))
            response = await client.post("/v1/jobs", json=job)
            return int(response.status_code == 202)

        start = time.perf_counter()
        count = int(rate * seconds)
        posts = [post_at(start + index / rate) for index in range(count)]
        return sum(await asyncio.gather(*posts))


def latency(args: argparse.Namespace) -> None:
    secret = new_secret()
    with (
        WebhookReceiver(secret) as receiver,
        running_server(**server_settings(secret, args.concurrency)) as server,
    ):
        job = {**SIM_JOB, "webhook": {"url": receiver.url}}
        accepted = asyncio.run(submit_at_rate(server.url, job, args.rate, args.seconds))
        expected = accepted * EVENTS_PER_JOB
        deadline = time.monotonic() + 120
        while len(receiver.accepted()) < expected and time.monotonic() < deadline:
            time.sleep(0.1)
        received = receiver.accepted()
    latencies_ms = [
        (each.at - datetime.fromisoformat(each.payload["timestamp"]).timestamp()) * 1000
        for each in received
    ]
    repeats = len(received) - len({each.id for each in received})
    unverified = sum(not each.verified for each in received)
    print(
        f"latency, {args.rate:g} jobs/s for {args.seconds:g} s: {accepted} jobs, "
        f"{len(received)}/{expected} events delivered ({repeats} twice, {unverified} unverified)"
    )
    print(f"{'events':>7} {'p50 ms':>7} {'p90 ms':>7} {'p99 ms':>7} {'max ms':>7}")
    print(
        f"{len(latencies_ms):>7} {percentile(latencies_ms, 0.5):>7.1f} "
        f"{percentile(latencies_ms, 0.9):>7.1f} {percentile(latencies_ms, 0.99):>7.1f} "
        f"{max(latencies_ms):>7.1f}"
    )


SIDES: dict[str, list[str] | None] = {
    "none": None,
    "all": [],
    "completed": ["completed"],
}
"""The webhook on every job: none, every event (3 a job), or its end only (1 a job)."""


def cost(args: argparse.Namespace) -> None:
    secret = new_secret()
    rates: dict[str, list[float]] = {side: [] for side in SIDES}
    print(f"{'webhook':>9} {'submits/s':>9} {'p99 ms':>7} {'cpu ms':>6} {'delivered':>9}")
    with WebhookReceiver(secret) as receiver:
        for _ in range(args.runs):
            for side, events in SIDES.items():
                job: dict[str, Any] = dict(SIM_JOB)
                if events is not None:
                    job["webhook"] = {"url": receiver.url, "events": events}
                before = len(receiver.accepted())
                settings = server_settings(None if events is None else secret, args.concurrency)
                with running_server(**settings) as server:
                    cpu_before = cpu_seconds(server.pid)
                    run = wrk(
                        f"{server.url}/v1/jobs",
                        connections=args.connections,
                        duration_s=args.duration,
                        body=json.dumps(job),
                    )
                    cpu_ms = (cpu_seconds(server.pid) - cpu_before) * 1000 / run.requests
                rates[side].append(run.rate)
                delivered = len(receiver.accepted()) - before
                print(
                    f"{side:>9} {run.rate:>9.0f} {run.p99_us / 1000:>7.1f} {cpu_ms:>6.2f} "
                    f"{delivered:>9}"
                )
    without = sum(rates["none"]) / len(rates["none"])
    for side in ("all", "completed"):
        ratio = sum(rates[side]) / len(rates[side]) / without
        print(f"{side} / none (mean of {args.runs}): {ratio:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=float, default=100, help="jobs per second submitted")
    parser.add_argument("--seconds", type=float, default=20, help="of submissions at --rate")
    parser.add_argument("--connections", type=int, default=32, help="wrk's, for the cost")
    parser.add_argument("--duration", type=int, default=10, help="seconds of each wrk run")
    parser.add_argument("--runs", type=int, default=2, help="pairs of wrk runs")
    parser.add_argument(
        "--concurrency", type=int, help="the server's webhook_concurrency (default: its default)"
    )
    args = parser.parse_args()
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"load average before: {load}; {os.cpu_count()} CPUs")
    latency(args)
    cost(args)


if __name__ == "__main__":
    main()
