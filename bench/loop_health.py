"""`/healthz` latency while every lane is busy: proof that job work never runs on the event loop.

python -m bench.loop_health [--probes 1000] [--lanes 2]
"""

from __future__ import annotations

import argparse
import time

import httpx

from bench._server import percentile, running_server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--probes", type=int, default=1000)
    parser.add_argument("--lanes", type=int, default=2)
    args = parser.parse_args()
    busy_job = {
        "kind": "inference",
        "model": "sim",
        "inputs": ["a.jpg"],
        "params": {"sim_seconds": 60, "sim_steps": 6000},
    }
    with (
        running_server(sim_lanes=args.lanes) as server,
        httpx.Client(base_url=server.url) as client,
    ):
        idle = probe(client, args.probes)
        jobs = [client.post("/v1/jobs", json=busy_job).json()["id"] for _ in range(args.lanes)]
        deadline = time.monotonic() + 10
        while any(client.get(f"/v1/jobs/{job}").json()["state"] != "running" for job in jobs):
            if time.monotonic() > deadline:
                raise RuntimeError("the busy jobs did not start")
            time.sleep(0.05)
        busy = probe(client, args.probes)
        for job in jobs:
            client.post(f"/v1/jobs/{job}/cancel")
    print(f"{'lanes busy':>10} {'probes':>7} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7}")
    for label, samples in (("0", idle), (f"{args.lanes}/{args.lanes}", busy)):
        print(
            f"{label:>10} {len(samples):>7} {percentile(samples, 0.5):>7.2f} "
            f"{percentile(samples, 0.99):>7.2f} {max(samples):>7.2f}"
        )


def probe(client: httpx.Client, count: int) -> list[float]:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        client.get("/healthz").raise_for_status()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


if __name__ == "__main__":
    main()
