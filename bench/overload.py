"""Overload: a burst of 10 x max_queued submissions from 32 concurrent clients against a real
server (simulated runtime, SQLite). The excess must get 429 with Retry-After, memory must stay
bounded, /healthz must keep answering, and every accepted job must complete.

    python -m bench.overload [--max-queued 50] [--factor 10] [--clients 32]

The run is `yolo_orch.testing.overload.run_overload`, which tests/proof/test_overload.py asserts on.
"""

from __future__ import annotations

import argparse
from collections import Counter

from bench._server import percentile, running_server
from yolo_orch.testing.overload import OverloadReport, run_overload


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
