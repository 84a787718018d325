"""Every task on the CPU: 1-epoch training on a tiny generated dataset per task, by ultralytics'
`train` called directly and through a real server (a training job from the task's shipped
config) with the same settings, interleaved task by task in one run; then a validation job on
each model the server produced, and the metrics it reported.

    python -m bench.tasks_training [--epochs 1] [--cpu-threads N]
"""

from __future__ import annotations

import argparse
import os
from datetime import datetime
from typing import Any

import httpx

from bench._yolo import JOB_TIMEOUT_S, TRAIN_SETTINGS, real_server, train_directly, workspace
from yolo_orch.testing import wait_terminal
from yolo_orch.testing.task_datasets import TASKS, make_task_dataset
from yolo_orch.testing.yolo import TASK_CONFIGS

N_TRAIN, N_VAL = 16, 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument(
        "--cpu-threads", type=int, default=os.cpu_count() or 1, help="torch threads, both sides"
    )
    args = parser.parse_args()
    with workspace({}) as ws:
        datasets = {
            task: make_task_dataset(task, ws.data / task, n_train=N_TRAIN, n_val=N_VAL)
            for task in TASKS
        }
        direct: dict[str, float] = {}
        served: dict[str, tuple[float, dict[str, Any]]] = {}
        with (
            real_server(ws, cpu_threads=args.cpu_threads) as server,
            httpx.Client(base_url=server.url, timeout=60) as client,
        ):
            for task in TASKS:  # interleaved, so both sides see the same neighbours' load
                architecture = TASK_CONFIGS[task]
                direct[task] = train_directly(
                    architecture, datasets[task], args.epochs, args.cpu_threads
                )
                served[task] = train_and_validate(client, task, architecture, args.epochs)
    print(
        f"generated datasets: {N_TRAIN} train + {N_VAL} val images of 64 px per task, "
        f"{args.epochs} epoch(s), {TRAIN_SETTINGS}, cpu, {args.cpu_threads} torch thread(s)"
    )
    print("| task | model | direct s | server run s | direct/run | validation job metrics |")
    print("|---|---|---:|---:|---:|---|")
    for task in TASKS:
        run_s, metrics = served[task]
        shown = ", ".join(f"{k} {v:.3f}" for k, v in metrics.items() if v is not None)
        print(
            f"| {task} | {TASK_CONFIGS[task]} | {direct[task]:.2f} | {run_s:.2f} | "
            f"{direct[task] / run_s:.2f} | {shown} |"
        )


def train_and_validate(
    client: httpx.Client, task: str, architecture: str, epochs: int
) -> tuple[float, dict[str, Any]]:
    """The training job's run time, and the metrics of a validation job on its model."""
    dataset = task if task == "classify" else f"{task}/data.yaml"
    body = {
        "kind": "training",
        "model": architecture,
        "dataset": dataset,
        "params": {"epochs": epochs, "output_name": f"bench-{task}", **TRAIN_SETTINGS},
    }
    trained = finished(client, client.post("/v1/jobs", json=body))
    validation = {
        "kind": "validation",
        "model": f"bench-{task}",
        "dataset": dataset,
        "params": {"imgsz": TRAIN_SETTINGS["imgsz"], "batch": TRAIN_SETTINGS["batch"]},
    }
    validated = finished(client, client.post("/v1/jobs", json=validation))
    run_s = _seconds(trained["finished_at"]) - _seconds(trained["started_at"])
    return run_s, validated["result"]["metrics"]


def finished(client: httpx.Client, response: httpx.Response) -> dict[str, Any]:
    if response.status_code != 202:
        raise RuntimeError(f"submission refused: {response.status_code} {response.text}")
    done = wait_terminal(client, response.json()["id"], JOB_TIMEOUT_S)
    if done["state"] != "succeeded":
        raise RuntimeError(f"{done['kind']} job ended {done['state']}: {done['error']}")
    return done


def _seconds(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp).timestamp()


if __name__ == "__main__":
    main()
