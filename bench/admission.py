"""Lane utilisation of the dispatcher: the jobs' own work (their `sim_seconds` x gpus) / (lanes x
wall time), simulated runtime, 4 simulated lanes, a saturating mixed stream of 1-lane inference
and 2-lane training jobs.

    python -m bench.admission [--lanes 4] [--seconds 0.05 0.2 1.0] [--work 12] [--training 0.2]
    python -m bench.admission --zero 3000 [--lanes 2] [--batch 1 8] [--database sqlite postgresql]

`--zero N`: the dispatcher's own cost per job instead. N inference jobs that take no time
(`sim_seconds: 0`, one step) are queued behind the gate; it prints how many jobs per second the
lanes drain (from the gate's end to the last job's end), for each `--batch` (the simulated
lanes' `batch_max_images`; 1: every job alone). Each job's claim and outcome are committed
writes, so the store's cost is in the figure: `--database postgresql` puts the store on a
throwaway PostgreSQL cluster (Debian's `postgresql`, `initdb` in TMPDIR, fsync on, a fresh
database each run); with both, each batch runs on SQLite then PostgreSQL, and the last lines give
their ratio.

How the stream saturates: a 4-lane "gate" job holds every lane while the queue is filled (so
submission speed does not limit the dispatcher), then is cancelled. Wall time runs from the
gate's end to the last job's end. `held` is the sum of (finished_at - started_at) x gpus of the
other jobs over the same: it counts what a job does after giving its lane back (writing its
result while the next job runs), so it can pass 1. `--work` sets how many seconds of work (per
lane) each run queues.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time
from datetime import datetime
from typing import Any

import httpx

from bench._databases import add_database_option, database_urls, print_ratio
from bench._server import running_server
from yolo_orch.testing import list_jobs, wait_all_terminal


def job_body(
    index: int, seconds: float, training_share: float, rng: random.Random
) -> dict[str, Any]:
    params = {"sim_seconds": seconds, "sim_steps": 2}
    if rng.random() < training_share:
        return {
            "kind": "training",
            "model": "sim",
            "dataset": f"d{index}",
            "gpus": 2,
            "params": params,
        }
    return {"kind": "inference", "model": "sim", "inputs": [f"i{index}"], "params": params}


async def fill(url: str, bodies: list[dict[str, Any]], clients: int = 8) -> None:
    todo = iter(bodies)

    async def loop(client: httpx.AsyncClient) -> None:
        for body in todo:
            response = await client.post("/v1/jobs", json=body)
            if response.status_code != 202:
                raise RuntimeError(f"{response.status_code}: {response.text}")

    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        await asyncio.gather(*(loop(client) for _ in range(clients)))


def run(lanes: int, seconds: float, work_s: float, training_share: float) -> dict[str, float]:
    rng = random.Random(42)
    lane_seconds_per_job = seconds * (1 + training_share)
    count = max(20, int(work_s * lanes / lane_seconds_per_job))
    bodies = [job_body(i, seconds, training_share, rng) for i in range(count)]
    gate_body = {
        "kind": "training",
        "model": "sim",
        "gpus": lanes,
        "params": {"sim_seconds": 3600, "sim_steps": 10_000},
    }
    with (
        running_server(sim_lanes=lanes, max_queued=count + 10) as server,
        httpx.Client(base_url=server.url, timeout=60) as client,
    ):
        gate = client.post("/v1/jobs", json=gate_body).json()["id"]
        while client.get(f"/v1/jobs/{gate}").json()["state"] != "running":
            time.sleep(0.01)
        asyncio.run(fill(server.url, bodies))
        client.post(f"/v1/jobs/{gate}/cancel")
        wait_all_terminal(client, timeout=count * seconds + 120)
        jobs = [job for job in list_jobs(client) if job["id"] != gate]
        gate_job = client.get(f"/v1/jobs/{gate}").json()
    states = {job["state"] for job in jobs}
    if states != {"succeeded"}:
        raise RuntimeError(f"unexpected job states: {states}")
    begin = _ts(gate_job["finished_at"])
    end = max(_ts(job["finished_at"]) for job in jobs)
    busy = sum(
        (_ts(job["finished_at"]) - _ts(job["started_at"])) * int(job["gpus"]) for job in jobs
    )
    ideal = sum(seconds * int(job["gpus"]) for job in jobs)
    wall = end - begin
    return {
        "jobs": len(jobs),
        "training": sum(job["kind"] == "training" for job in jobs),
        "wall": wall,
        "utilisation": ideal / (lanes * wall),
        "held": busy / (lanes * wall),
    }


def run_zero(lanes: int, count: int, batch: int, database_url: str = "") -> dict[str, float]:
    """`database_url` "": SQLite in the server's data dir."""
    params = {"sim_seconds": 0, "sim_steps": 1}
    bodies = [
        {"kind": "inference", "model": "sim", "inputs": [f"i{i}"], "params": params}
        for i in range(count)
    ]
    gate_body = {
        "kind": "training",
        "model": "sim",
        "gpus": lanes,
        "params": {"sim_seconds": 3600, "sim_steps": 10_000},
    }
    # Neither batch_max_images (on older commits too) when every job runs alone, nor a
    # database_url for SQLite.
    settings: dict[str, Any] = {"sim_lanes": lanes, "max_queued": count + 10}
    if batch > 1:
        settings["batch_max_images"] = {"sim": batch}
    if database_url:
        settings["database_url"] = database_url
    with (
        running_server(**settings) as server,
        httpx.Client(base_url=server.url, timeout=60) as client,
    ):
        gate = client.post("/v1/jobs", json=gate_body).json()["id"]
        while client.get(f"/v1/jobs/{gate}").json()["state"] != "running":
            time.sleep(0.01)
        asyncio.run(fill(server.url, bodies))
        client.post(f"/v1/jobs/{gate}/cancel")
        wait_all_terminal(client, timeout=count + 120)
        jobs = [job for job in list_jobs(client) if job["id"] != gate]
        gate_job = client.get(f"/v1/jobs/{gate}").json()
    states = {job["state"] for job in jobs}
    if states != {"succeeded"}:
        raise RuntimeError(f"unexpected job states: {states}")
    wall = max(_ts(job["finished_at"]) for job in jobs) - _ts(gate_job["finished_at"])
    return {"jobs": len(jobs), "wall": wall, "rate": len(jobs) / wall}


def _ts(stamp: Any) -> float:
    return datetime.fromisoformat(str(stamp)).timestamp()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lanes", type=int, default=4)
    parser.add_argument("--seconds", type=float, nargs="+", default=[0.05, 0.2, 1.0])
    parser.add_argument("--work", type=float, default=12.0, help="seconds of work per lane")
    parser.add_argument("--training", type=float, default=0.2, help="share of 2-lane jobs")
    parser.add_argument("--zero", type=int, default=0, help="zero-second jobs to drain instead")
    parser.add_argument("--batch", type=int, nargs="+", default=[1], help="with --zero")
    add_database_option(parser, "with --zero: the store's engines, each measured per batch")
    args = parser.parse_args()
    if args.zero:
        _main_zero(args)
        return
    print(f"{args.lanes} simulated lanes; {args.training:.0%} of jobs are 2-lane training")
    print(
        f"{'sim_seconds':>11} {'jobs':>6} {'2-lane':>6} {'wall s':>7} "
        f"{'utilisation':>11} {'held':>7}"
    )
    for seconds in args.seconds:
        row = run(args.lanes, seconds, args.work, args.training)
        print(
            f"{seconds:>11.2f} {row['jobs']:>6.0f} {row['training']:>6.0f} {row['wall']:>7.1f} "
            f"{row['utilisation']:>11.3f} {row['held']:>7.3f}"
        )
    print("utilisation: the jobs' own sim_seconds; held: started_at..finished_at")


def _main_zero(args: argparse.Namespace) -> None:
    print(f"{args.zero} zero-second inference jobs through {args.lanes} simulated lanes")
    print(f"load average before: {_load()}; {os.cpu_count()} CPUs")
    print(f"{'db':>10} {'batch':>5} {'jobs':>6} {'wall s':>7} {'jobs/s':>7}")
    rates: dict[int, dict[str, list[float]]] = {
        batch: {engine: [] for engine in args.database} for batch in args.batch
    }
    with database_urls(args.database) as database_url:
        for batch in args.batch:
            for engine in args.database:
                row = run_zero(args.lanes, args.zero, batch, database_url(engine))
                rates[batch][engine].append(row["rate"])
                print(
                    f"{engine:>10} {batch:>5} {row['jobs']:>6.0f} {row['wall']:>7.2f} "
                    f"{row['rate']:>7.0f}",
                    flush=True,
                )
    for batch in args.batch:
        print_ratio(rates[batch], f"jobs/s at batch {batch}")
    print(f"load average after: {_load()}")


def _load() -> str:
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


if __name__ == "__main__":
    main()
