"""Frames/s of a video job through the server vs ultralytics' own `predict` and `track` on the same
file, checkpoint and settings, in one run.

    python -m bench.video [--imgsz 320] [--frames 300] [--repeats 2] [--max-det 20]

The video: generated moving shapes, 640x480 at 30 fps (mp4v). The checkpoint: the benches' tiny
yolo11n whose head finds class 0 everywhere, so `--max-det` sets how many detections each frame
has (and the tracker follows). Server: the job's own `finished_at - started_at` (run), and POST
to the long poll that returns it succeeded (e2e); a short job first loads and warms the model.
Direct: `YOLO(path)` warmed the same way, then `predict(source=<file>, stream=True)` or
`track(source=<file>, stream=True, tracker="bytetrack.yaml")`, every result consumed, with the
same imgsz, conf, iou, max_det and torch thread count as the server's CPU lane. The two sides
alternate, so load from other processes lands on both. ultralytics reads a video one frame per
batch by default and the server batches frames (`batch_size(imgsz)`), so a last line compares
the server with a direct `predict(..., batch=N)` of the same batch size.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

import httpx

from bench._yolo import JOB_TIMEOUT_S, MODEL, real_server, workspace
from bench.inference_overhead import server_job_seconds
from yolo_orch.testing import wait_terminal
from yolo_orch.testing.video import make_video

VIDEO = "clips/bench.mp4"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--imgsz", type=int, default=320)
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-det", type=int, default=20)
    args = parser.parse_args()

    settings = {"imgsz": args.imgsz, "conf": 0.25, "iou": 0.7, "max_det": args.max_det}
    server_runs: dict[str, list[tuple[float, float]]] = {}
    direct_runs: dict[str, list[float]] = {}
    with workspace({}) as ws, real_server(ws) as server:
        video = ws.data / VIDEO
        make_video(video, frames=args.frames, size=(640, 480), objects=4)
        direct = Direct(ws.weights, settings, video)
        with httpx.Client(base_url=server.url, timeout=60) as client:
            server_job(client, {**settings, "max_frames": 5})  # loads and warms the model
            for _ in range(args.repeats):
                for mode, extra in (("predict", {}), ("track", {"track": "bytetrack"})):
                    server_runs.setdefault(mode, []).append(server_job(client, settings | extra))
                    direct_runs.setdefault(mode, []).append(direct.run(mode))
                direct_runs.setdefault("batched", []).append(direct.run("batched"))

    print(
        f"{args.frames} frames 640x480, imgsz {args.imgsz}, max_det {args.max_det}, "
        f"{os.cpu_count()} CPUs, {direct.threads} torch threads, model {MODEL} (yolo11n), "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(
        f"{'mode':>8} {'direct fps':>10} {'server run fps':>14} {'server e2e fps':>14} "
        f"{'run/direct':>10} {'e2e/direct':>10}"
    )
    for mode in ("predict", "track"):
        direct_s = statistics.median(direct_runs[mode])
        e2e_s = statistics.median(run[0] for run in server_runs[mode])
        run_s = statistics.median(run[1] for run in server_runs[mode])
        frames = args.frames
        print(
            f"{mode:>8} {frames / direct_s:>10.1f} {frames / run_s:>14.1f} "
            f"{frames / e2e_s:>14.1f} {direct_s / run_s:>10.2f} {direct_s / e2e_s:>10.2f}"
        )
    batched_fps = args.frames / statistics.median(direct_runs["batched"])
    predict_run_s = statistics.median(run[1] for run in server_runs["predict"])
    print(
        f"{'predict':>8} direct with batch={direct.batch}: {batched_fps:.1f} fps; server run "
        f"/ that: {args.frames / predict_run_s / batched_fps:.2f}"
    )
    print(f"(ratio = server frames/s / direct frames/s; medians of {args.repeats} runs each)")


def server_job(client: httpx.Client, params: dict[str, Any]) -> tuple[float, float]:
    """(end-to-end seconds, the job's own run seconds)."""
    job = {"kind": "inference", "model": MODEL, "inputs": [VIDEO], "params": params}
    started = time.perf_counter()
    response = client.post("/v1/jobs", json=job)
    if response.status_code != 202:
        raise RuntimeError(f"{response.status_code} {response.text}")
    done = wait_terminal(client, response.json()["id"], JOB_TIMEOUT_S)
    elapsed = time.perf_counter() - started
    if done["state"] != "succeeded":
        raise RuntimeError(f"job ended {done['state']}: {done['error']}")
    return elapsed, server_job_seconds(done)


class Direct:
    """ultralytics on the video file itself, as a user would call it."""

    def __init__(self, weights: Path, settings: dict[str, Any], video: Path) -> None:
        import numpy as np
        import torch
        from ultralytics.models import YOLO

        from yolo_orch.runners.decode import batch_size
        from yolo_orch.runners.inference import default_cpu_threads

        self.torch = torch
        self.threads = default_cpu_threads()
        self.batch = batch_size(int(settings["imgsz"]))
        self.settings = {**settings, "device": "cpu", "verbose": False, "save": False}
        self.video = str(video)
        self.model: Any = YOLO(str(weights))
        torch.set_num_threads(self.threads)
        blank = np.zeros((480, 640, 3), dtype=np.uint8)
        self.model.predict(source=blank, **self.settings)  # set up and warm, like the server

    def run(self, mode: str) -> float:
        self.torch.set_num_threads(self.threads)  # what the server sets on its CPU lane
        started = time.perf_counter()
        if mode == "track":
            results = self.model.track(
                source=self.video, stream=True, tracker="bytetrack.yaml", **self.settings
            )
        elif mode == "batched":  # frames batched as the server batches them
            results = self.model.predict(
                source=self.video, stream=True, batch=self.batch, **self.settings
            )
        else:
            results = self.model.predict(source=self.video, stream=True, **self.settings)
        for result in results:
            _ = result.boxes  # consume like the server does
        return time.perf_counter() - started


if __name__ == "__main__":
    main()
