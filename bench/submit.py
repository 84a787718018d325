"""POST /v1/jobs throughput and latency against a real server (SQLite, synchronous=FULL,
simulated runtime), for several numbers of concurrent clients.

    python bench/submit.py [--jobs 2000] [--clients 1 8 32]
"""

from __future__ import annotations

import argparse
import asyncio
import time

import httpx

from bench._server import percentile, running_server

JOB = {"kind": "inference", "model": "sim", "inputs": ["a.jpg"], "params": {"sim_seconds": 0}}


async def submit_all(url: str, jobs: int, clients: int) -> tuple[float, list[float]]:
    latencies: list[float] = []
    remaining = iter(range(jobs))
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async def client_loop(client: httpx.AsyncClient) -> None:
        for _ in remaining:
            started = time.perf_counter()
            response = await client.post("/v1/jobs", json=JOB)
            latencies.append(time.perf_counter() - started)
            if response.status_code != 202:
                raise RuntimeError(f"{response.status_code}: {response.text}")

    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30) as client:
        started = time.perf_counter()
        await asyncio.gather(*(client_loop(client) for _ in range(clients)))
        return time.perf_counter() - started, latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=2000, help="submissions per run")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    args = parser.parse_args()
    print(f"{'clients':>7} {'jobs':>6} {'jobs/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for clients in args.clients:
        # A fresh server per run; max_queued above the job count so nothing is refused.
        with running_server(max_queued=args.jobs * 2, sim_lanes=2) as server:
            elapsed, latencies = asyncio.run(submit_all(server.url, args.jobs, clients))
        ms = [latency * 1000 for latency in latencies]
        print(
            f"{clients:>7} {args.jobs:>6} {args.jobs / elapsed:>8.0f} "
            f"{percentile(ms, 0.5):>8.1f} {percentile(ms, 0.99):>8.1f} {max(ms):>8.1f}"
        )


if __name__ == "__main__":
    main()
