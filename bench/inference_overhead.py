"""Images/s of real inference through the server vs ultralytics `predict` called directly in this
process, on the same checkpoint, images and settings, in one run.

    python -m bench.inference_overhead [--imgsz 320] [--repeats 3]

Server: the time from POST /v1/jobs to the poll (every 5 ms) that sees the job succeeded
(end to end, what a client gets), and the job's own `finished_at - started_at` (server side).
Direct: `YOLO(path)` (cold only) then `predict(stream=True)` over the same image files, with the
same imgsz, conf, iou, max_det and thread count as the server's CPU lane. Cold = the first job
after the model import (the server loads and warms the model) vs a fresh `YOLO(path)` + predict.
Only one side runs at a time; the server idles while the direct runs are measured.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from bench._yolo import inference_job, real_server, wait_job, workspace

SETS = {"one": 1, "batch32": 32}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--imgsz", type=int, default=320)
    parser.add_argument("--repeats", type=int, default=3, help="warm runs per job size")
    args = parser.parse_args()

    rows: list[tuple[str, int, float, float, float]] = []
    with workspace(SETS) as ws, real_server(ws) as server:
        paths = {name: sorted((ws.data / name).glob("*.jpg")) for name in SETS}
        with httpx.Client(base_url=server.url, timeout=60) as client:
            server_runs = {
                ("cold", 1): [server_job(client, "one/*.jpg", args.imgsz)],
                ("warm", 1): [
                    server_job(client, "one/*.jpg", args.imgsz) for _ in range(args.repeats * 3)
                ],
                ("warm", 32): [
                    server_job(client, "batch32/*.jpg", args.imgsz) for _ in range(args.repeats)
                ],
            }
        direct_runs = direct(ws.weights, paths, args.imgsz, args.repeats)

    print(f"imgsz {args.imgsz}, CPU threads {os.cpu_count()}, model {ws.weights.name} (yolo11n)")
    header = (
        f"{'run':>5} {'images':>6} {'direct img/s':>12} {'server e2e img/s':>16} "
        f"{'server run img/s':>16} {'e2e/direct':>10} {'run/direct':>10}"
    )
    print(header)
    for key in (("cold", 1), ("warm", 1), ("warm", 32)):
        label, images = key
        direct_s = statistics.median(direct_runs[key])
        e2e_s = statistics.median(run[0] for run in server_runs[key])
        run_s = statistics.median(run[1] for run in server_runs[key])
        rows.append((label, images, direct_s, e2e_s, run_s))
        print(
            f"{label:>5} {images:>6} {images / direct_s:>12.1f} {images / e2e_s:>16.1f} "
            f"{images / run_s:>16.1f} {direct_s / e2e_s:>10.2f} {direct_s / run_s:>10.2f}"
        )
    # The cold server job, broken down: loading + warm-up is inside the run time.
    print("(ratio = server images/s / direct images/s; medians of the runs)")


def server_job(client: httpx.Client, pattern: str, imgsz: int) -> tuple[float, float]:
    """(end-to-end seconds, the job's own run seconds)."""
    started = time.perf_counter()
    response = client.post("/v1/jobs", json=inference_job([pattern], imgsz))
    if response.status_code != 202:
        raise RuntimeError(f"{response.status_code} {response.text}")
    job = wait_job(client, response.json()["id"])
    elapsed = time.perf_counter() - started
    if job["state"] != "succeeded":
        raise RuntimeError(f"job ended {job['state']}: {job['error']}")
    run = _seconds(job["finished_at"]) - _seconds(job["started_at"])
    return elapsed, run


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def direct(
    weights: Path, paths: dict[str, list[Path]], imgsz: int, repeats: int
) -> dict[tuple[str, int], list[float]]:
    import torch
    from ultralytics.models import YOLO

    torch.set_num_threads(os.cpu_count() or 1)  # what the server sets on its CPU lane
    settings: dict[str, Any] = {
        "device": "cpu",
        "imgsz": imgsz,
        "conf": 0.25,
        "iou": 0.7,
        "max_det": 300,
        "verbose": False,
        "save": False,
    }

    def predict(model: YOLO, files: list[Path]) -> None:
        for result in model.predict(source=[str(f) for f in files], stream=True, **settings):
            _ = result.boxes  # consume like the server does
        return None

    runs: dict[tuple[str, int], list[float]] = {}
    started = time.perf_counter()
    model = YOLO(str(weights))
    predict(model, paths["one"])
    runs[("cold", 1)] = [time.perf_counter() - started]
    runs[("warm", 1)] = [_timed(predict, model, paths["one"]) for _ in range(repeats * 3)]
    runs[("warm", 32)] = [_timed(predict, model, paths["batch32"]) for _ in range(repeats)]
    return runs


def _timed(predict: Any, model: Any, files: list[Path]) -> float:
    started = time.perf_counter()
    predict(model, files)
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
