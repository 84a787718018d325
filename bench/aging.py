"""Priority aging against a real simulated server: how long the lowest-priority job waits under
a saturating stream of highest-priority jobs, with aging off and on.

    python -m bench.aging [--stream-s 30] [--rates 0 600 1000] [--job-s 0.05]

One simulated lane. A few priority 100 jobs are submitted, then one priority -100 job; then a
client keeps a few priority 100 jobs queued at all times for `--stream-s` seconds, so the lane
never lacks a higher job.
Aging is per minute; the rates here are steep so that a run takes seconds, not hours: with rate
r, the low job needs about 200 / r minutes to climb past the stream (a little more, since the
stream's queued jobs age too). With aging off it waits for the stream to end.
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime
from typing import Any

import httpx

from bench._server import percentile, running_server
from yolo_orch.testing import wait_all_terminal


def job(priority: int, seconds: float) -> dict[str, Any]:
    return {
        "kind": "inference",
        "model": "sim",
        "inputs": ["i"],
        "priority": priority,
        "params": {"sim_seconds": seconds, "sim_steps": 1},
    }


def run(rate: float, stream_s: float, job_s: float, depth: int = 4) -> dict[str, float]:
    with (
        running_server(sim_lanes=1, priority_aging_per_minute=rate, max_queued=10_000) as server,
        httpx.Client(base_url=server.url, timeout=60) as client,
    ):
        high = [client.post("/v1/jobs", json=job(100, job_s)).json()["id"] for _ in range(depth)]
        low = client.post("/v1/jobs", json=job(-100, job_s)).json()["id"]
        end = time.monotonic() + stream_s
        while time.monotonic() < end:
            queued = client.get("/v1/jobs", params={"state": "queued", "limit": depth + 2}).json()
            for _ in range(depth + 2 - len(queued["jobs"])):  # the low job is one of them
                high.append(client.post("/v1/jobs", json=job(100, job_s)).json()["id"])
            time.sleep(job_s / 2)
        wait_all_terminal(client, timeout=120)
        low_job = client.get(f"/v1/jobs/{low}").json()
        high_waits = [_wait(client.get(f"/v1/jobs/{job_id}").json()) for job_id in high]
        stream_started = _ts(client.get(f"/v1/jobs/{high[0]}").json()["created_at"])
    started = _ts(low_job["started_at"])
    return {
        "low_wait": started - _ts(low_job["created_at"]),
        "during_stream": float(started < stream_started + stream_s),
        "high_jobs": len(high),
        "high_p50": percentile(high_waits, 0.5),
        "high_p99": percentile(high_waits, 0.99),
    }


def _wait(job: dict[str, Any]) -> float:
    return _ts(job["started_at"]) - _ts(job["created_at"])


def _ts(stamp: Any) -> float:
    return datetime.fromisoformat(str(stamp)).timestamp()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--stream-s", type=float, default=30.0)
    parser.add_argument("--rates", type=float, nargs="+", default=[0.0, 600.0, 1000.0])
    parser.add_argument("--job-s", type=float, default=0.05)
    args = parser.parse_args()
    print(
        f"1 simulated lane; a priority -100 job under a {args.stream_s:g}s stream of priority "
        f"100 jobs of {args.job_s:g}s each"
    )
    print(
        f"{'aging/min':>9} {'expect s':>8} {'low wait s':>10} {'in stream':>9} "
        f"{'high jobs':>9} {'high p50 s':>10} {'high p99 s':>10}"
    )
    for rate in args.rates:
        row = run(rate, args.stream_s, args.job_s)
        expect = f"{200 / rate * 60:.1f}" if rate else "never"
        print(
            f"{rate:>9g} {expect:>8} {row['low_wait']:>10.2f} "
            f"{'yes' if row['during_stream'] else 'no':>9} {row['high_jobs']:>9.0f} "
            f"{row['high_p50']:>10.3f} {row['high_p99']:>10.3f}"
        )
    print("in stream: the low job started while the high-priority stream was still going")


if __name__ == "__main__":
    main()
