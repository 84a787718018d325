"""Training on the CPU: the same tiny generated dataset trained through the server (a training
job from `yolo11n.yaml`) and by ultralytics' `train` called directly with the same settings,
in one run; and `/healthz` latency while the server trains.

    python -m bench.training_overhead [--epochs 3] [--probe-seconds 8]
"""

from __future__ import annotations

import argparse
import os
import time

import httpx

from bench._server import percentile
from bench._yolo import JOB_TIMEOUT_S, TRAIN_SETTINGS, real_server, train_directly, workspace
from bench.loop_health_real import probe_for, wait_running
from yolo_orch.testing import wait_terminal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--probe-seconds", type=float, default=8.0)
    parser.add_argument(
        "--cpu-threads", type=int, default=os.cpu_count() or 1, help="torch threads, both sides"
    )
    args = parser.parse_args()
    with workspace({}, dataset=True) as ws:
        data_yaml = ws.data / "train-set" / "data.yaml"
        direct_s = train_directly("yolo11n.yaml", data_yaml, args.epochs, args.cpu_threads)
        with (
            real_server(ws, cpu_threads=args.cpu_threads) as server,
            httpx.Client(base_url=server.url, timeout=60) as client,
        ):
            served = train_through(client, args.epochs)
            loop = loop_health_while_training(client, args.probe_seconds)
    run_s = served["run_s"]
    print(
        f"tiny dataset: 16 train + 4 val images, {args.epochs} epochs, {TRAIN_SETTINGS}, cpu, "
        f"{args.cpu_threads} torch thread(s)"
    )
    print(f"{'':>30} {'seconds':>8}")
    print(f"{'ultralytics train, direct':>30} {direct_s:>8.2f}")
    print(f"{'server: job run time':>30} {run_s:>8.2f}   ratio direct/run {direct_s / run_s:.2f}")
    print(f"{'server: submit to succeeded':>30} {served['wall_s']:>8.2f}")
    print(
        f"/healthz while training: {len(loop)} probes, p50 {percentile(loop, 0.5):.2f} ms, "
        f"p99 {percentile(loop, 0.99):.2f} ms, max {max(loop):.2f} ms"
    )


def train_through(client: httpx.Client, epochs: int) -> dict[str, float]:
    body = {
        "kind": "training",
        "model": "yolo11n.yaml",
        "dataset": "train-set/data.yaml",
        "params": {"epochs": epochs, **TRAIN_SETTINGS},
    }
    started = time.perf_counter()
    job = client.post("/v1/jobs", json=body).json()
    done = wait_terminal(client, job["id"], JOB_TIMEOUT_S)
    wall = time.perf_counter() - started
    if done["state"] != "succeeded":
        raise RuntimeError(f"training job ended {done['state']}: {done['error']}")
    run = _seconds(done["finished_at"]) - _seconds(done["started_at"])
    return {"wall_s": wall, "run_s": run}


def loop_health_while_training(client: httpx.Client, seconds: float) -> list[float]:
    body = {
        "kind": "training",
        "model": "yolo11n.yaml",
        "dataset": "train-set/data.yaml",
        "params": {"epochs": 200, **TRAIN_SETTINGS},
    }
    job = client.post("/v1/jobs", json=body).json()["id"]
    wait_running(client, [job], timeout_s=60)
    samples = probe_for(client, seconds)
    client.post(f"/v1/jobs/{job}/cancel")
    wait_terminal(client, job, JOB_TIMEOUT_S)
    return samples


def _seconds(timestamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(timestamp).timestamp()


if __name__ == "__main__":
    main()
