"""The Ray executor against the thread executor, in the same run, on the simulated runtime:
a `ray.cluster_utils.Cluster` of 2 nodes x 2 logical GPUs against 4 simulated lanes.

    python -m bench.ray_cluster [--seconds 0.2] [--work 6] [--jobs 30]

Ray listens on every interface, so this re-runs itself inside a network namespace that has
nothing but loopback (`unshare -n`, as root) and refuses to start Ray anywhere else.

- utilisation: busy lane-time / (lanes x wall) for a saturating stream of `--seconds` jobs
  (80 % 1-lane inference, 20 % 2-lane training), queued while gate jobs hold every lane, as in
  `bench.admission`;
- per-job overhead: `--jobs` jobs of 10 ms one after another, each submitted with
  `Prefer: wait`: the client's latency, and the run's (started_at..finished_at) cost beyond its
  10 ms;
- node join: every lane held, one job queued, then a 1-GPU node joins: the time from
  `add_node` returning to that job starting, and ending.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import time
from datetime import datetime
from typing import Any

import httpx

from bench._server import list_jobs, running_server, wait_all_terminal
from bench.admission import fill, job_body

TINY_S = 0.01


def loopback_only() -> bool:
    return {name for _, name in socket.if_nameindex()} == {"lo"}


def gate(gpus: int) -> dict[str, Any]:
    return {
        "kind": "training",
        "model": "sim",
        "dataset": "gate",
        "gpus": gpus,
        "params": {"sim_seconds": 3600, "sim_steps": 10_000},
    }


def wait_state(client: httpx.Client, job_id: str, states: set[str], timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job["state"] in states:
            return job
        time.sleep(0.005)
    raise TimeoutError(f"job {job_id} not {states} within {timeout_s}s")


def hold_every_lane(client: httpx.Client, gates: list[int]) -> list[str]:
    ids = [client.post("/v1/jobs", json=gate(gpus)).json()["id"] for gpus in gates]
    for job_id in ids:
        wait_state(client, job_id, {"running"}, 60)
    return ids


def utilisation(url: str, gates: list[int], seconds: float, work_s: float) -> dict[str, float]:
    rng = random.Random(42)
    lanes = sum(gates)
    count = max(20, int(work_s * lanes / (seconds * 1.2)))
    bodies = [job_body(i, seconds, 0.2, rng) for i in range(count)]
    with httpx.Client(base_url=url, timeout=60) as client:
        held = hold_every_lane(client, gates)
        asyncio.run(fill(url, bodies))
        for job_id in held:
            client.post(f"/v1/jobs/{job_id}/cancel")
        gates_done = [wait_state(client, job_id, {"cancelled"}, 30) for job_id in held]
        wait_all_terminal(client, timeout_s=count * seconds + 120)
        first = min(_ts(job["created_at"]) for job in gates_done)
        recent = [
            job
            for job in list_jobs(client)
            if job["id"] not in held and _ts(job["created_at"]) >= first
        ]
    states = {job["state"] for job in recent}
    if states != {"succeeded"}:
        raise RuntimeError(f"unexpected job states: {states}")
    begin = max(_ts(job["finished_at"]) for job in gates_done)
    end = max(_ts(job["finished_at"]) for job in recent)
    busy = sum(
        (_ts(job["finished_at"]) - max(begin, _ts(job["started_at"]))) * int(job["gpus"])
        for job in recent
    )
    wall = end - begin
    return {"jobs": len(recent), "wall": wall, "utilisation": busy / (lanes * wall)}


def overhead(url: str, count: int) -> dict[str, float]:
    body = {
        "kind": "inference",
        "model": "sim",
        "inputs": ["x.jpg"],
        "params": {"sim_seconds": TINY_S, "sim_steps": 1},
    }
    latencies, run_costs = [], []
    with httpx.Client(base_url=url, timeout=60) as client:
        for _ in range(count):
            started = time.perf_counter()
            job = client.post("/v1/jobs", json=body, headers={"Prefer": "wait=30"}).json()
            if job["state"] != "succeeded":
                job = wait_state(client, job["id"], {"succeeded"}, 30)
            latencies.append(time.perf_counter() - started)
            run_costs.append(_ts(job["finished_at"]) - _ts(job["started_at"]) - TINY_S)
    return {
        "latency_ms": 1000 * statistics.median(latencies),
        "run_overhead_ms": 1000 * statistics.median(run_costs),
    }


def node_join(url: str, cluster: Any) -> dict[str, float]:
    with httpx.Client(base_url=url, timeout=60) as client:
        held = hold_every_lane(client, [2, 2])
        waiting = client.post("/v1/jobs", json=job_body(0, TINY_S, 0.0, random.Random(1)))
        job_id = waiting.json()["id"]
        cluster.add_node(num_cpus=1, num_gpus=1)
        joined = time.time()
        running = wait_state(client, job_id, {"running", "succeeded"}, 60)
        seen = time.time()
        done = wait_state(client, job_id, {"succeeded"}, 60)
        for gate_id in held:
            client.post(f"/v1/jobs/{gate_id}/cancel")
    return {
        "to_start_s": (_ts(running["started_at"]) if running["started_at"] else seen) - joined,
        "to_end_s": _ts(done["finished_at"]) - joined,
    }


def _ts(stamp: Any) -> float:
    return datetime.fromisoformat(str(stamp)).timestamp()


def warm(url: str, jobs: int) -> None:
    """Start the workers a run uses (Ray starts a worker process per concurrent task)."""
    bodies = [job_body(i, TINY_S, 0.0, random.Random(i)) for i in range(jobs)]
    asyncio.run(fill(url, bodies))
    with httpx.Client(base_url=url, timeout=60) as client:
        wait_all_terminal(client, timeout_s=120)


def run(args: argparse.Namespace) -> None:
    from ray.cluster_utils import Cluster

    cluster: Any = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0})
    for _ in range(2):
        cluster.add_node(num_cpus=1, num_gpus=2)
    cluster.wait_for_nodes()
    rows: dict[str, dict[str, float]] = {}
    try:
        executors: dict[str, tuple[dict[str, Any], list[int]]] = {
            "threads": ({"sim_lanes": 4}, [4]),
            "ray": ({"executor": "ray", "ray_address": cluster.address}, [2, 2]),
        }
        for name, (settings, gates) in executors.items():
            with running_server(max_queued=10_000, ray_poll_interval_s=0.2, **settings) as server:
                warm(server.url, 8)
                row = {"startup_s": server.startup_s}
                row |= utilisation(server.url, gates, args.seconds, args.work)
                row |= overhead(server.url, args.jobs)
                if name == "ray":
                    row |= node_join(server.url, cluster)
                rows[name] = row
    finally:
        cluster.shutdown()
    print(f"load average: {os.getloadavg()[0]:.2f}; {args.seconds}s jobs for utilisation")
    print(f"{'executor':>8} {'jobs':>5} {'utilisation':>11} {'latency ms':>10} {'run cost ms':>11}")
    for name, row in rows.items():
        print(
            f"{name:>8} {row['jobs']:>5.0f} {row['utilisation']:>11.3f} "
            f"{row['latency_ms']:>10.1f} {row['run_overhead_ms']:>11.1f}"
        )
    ratio = rows["ray"]["latency_ms"] / rows["threads"]["latency_ms"]
    print(f"ray / threads latency of a {TINY_S * 1000:.0f} ms job: {ratio:.2f}x")
    ray_row = rows["ray"]
    print(
        f"node join -> its first job started: {ray_row['to_start_s']:.2f}s, "
        f"ended: {ray_row['to_end_s']:.2f}s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=0.2)
    parser.add_argument("--work", type=float, default=6.0, help="seconds of work per lane")
    parser.add_argument("--jobs", type=int, default=30, help="jobs for the overhead")
    args = parser.parse_args()
    if loopback_only():
        run(args)
        return
    if shutil.which("unshare") is None:
        sys.exit("needs `unshare -n` (root): Ray must not listen on a real interface")
    inside = 'ip link set lo up && exec "$@"'
    command = [sys.executable, "-m", "bench.ray_cluster", *sys.argv[1:]]
    sys.exit(subprocess.call(["unshare", "-n", "sh", "-c", inside, "sh", *command]))


if __name__ == "__main__":
    main()
