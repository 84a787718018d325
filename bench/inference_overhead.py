"""Images/s of real inference through the server vs ultralytics `predict` called directly in this
process, on the same checkpoint, images and settings, in one run.

    python -m bench.inference_overhead [--imgsz 320] [--repeats 3]

Server: the time from POST /v1/jobs to the long poll (`Prefer: wait`) that returns it succeeded
(end to end, what a client gets), and the job's own `finished_at - started_at` (server side).
Direct: `YOLO(path)` (cold only), then the same image files decoded as the server decodes them and
`predict(stream=True)` over that list (ultralytics batches it), with the same imgsz, conf, iou,
max_det and thread count as the server's CPU lane. Cold = the first job
after the model import (the server loads and warms the model) vs a fresh `YOLO(path)` + predict.
Only one side runs at a time (the server idles while a direct run is measured); the two sides'
runs alternate, so load from other processes lands on both.
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

from bench._yolo import JOB_TIMEOUT_S, inference_job, real_server, workspace
from yolo_orch.testing import wait_terminal

SETS = {"one": 1, "batch32": 32}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--imgsz", type=int, default=320)
    parser.add_argument("--repeats", type=int, default=3, help="warm runs per job size")
    args = parser.parse_args()

    rows: list[tuple[str, int, float, float, float]] = []
    with workspace(SETS) as ws, real_server(ws) as server:
        paths = {name: sorted((ws.data / name).glob("*.jpg")) for name in SETS}
        direct = Direct(ws.weights, args.imgsz)
        server_runs: dict[tuple[str, int], list[tuple[float, float]]] = {}
        direct_runs: dict[tuple[str, int], list[float]] = {}
        with httpx.Client(base_url=server.url, timeout=60) as client:
            server_runs[("cold", 1)] = [server_job(client, "one/*.jpg", args.imgsz)]
            direct_runs[("cold", 1)] = [direct.cold(paths["one"])]
            # Interleaved, so that load from other processes on a shared host drifts onto both
            # sides alike rather than onto whichever side ran later.
            for _ in range(args.repeats):
                for key, name, pattern, times in (
                    (("warm", 1), "one", "one/*.jpg", 3),
                    (("warm", 32), "batch32", "batch32/*.jpg", 1),
                ):
                    for _ in range(times):
                        run = server_job(client, pattern, args.imgsz)
                        server_runs.setdefault(key, []).append(run)
                        direct_runs.setdefault(key, []).append(direct.warm(paths[name]))

    print(
        f"imgsz {args.imgsz}, {os.cpu_count()} CPUs, {direct.threads} torch threads, "
        f"model {ws.weights.name} (yolo11n)"
    )
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
    job = wait_terminal(client, response.json()["id"], JOB_TIMEOUT_S)
    elapsed = time.perf_counter() - started
    if job["state"] != "succeeded":
        raise RuntimeError(f"job ended {job['state']}: {job['error']}")
    return elapsed, server_job_seconds(job)


def server_job_seconds(job: dict[str, Any]) -> float:
    """A finished job's own run time: `finished_at - started_at`."""
    return _seconds(job["finished_at"]) - _seconds(job["started_at"])


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


class Direct:
    """ultralytics called directly, as a user would on the job's files: decode them with
    ultralytics' own `imread` (`np.fromfile` + `cv2.imdecode`, the server's decode path; a list of
    paths would make ultralytics decode with PIL instead), then one `predict(stream=True)` over the
    list of arrays, which ultralytics runs as one batch. Same thread count as the server's CPU lane.
    """

    def __init__(self, weights: Path, imgsz: int, *, half: bool = False) -> None:
        import torch  # imported here, outside the timed runs
        from ultralytics.models import YOLO
        from ultralytics.utils.patches import imread

        from yolo_orch.runners.inference import default_cpu_threads

        self.torch, self.yolo, self.imread = torch, YOLO, imread
        self.threads = default_cpu_threads()
        self.weights = weights
        self.half = half
        """For an OpenVINO folder: the precision it is compiled for, as the server does."""
        self.settings: dict[str, Any] = {
            "device": "cpu",
            "imgsz": imgsz,
            "conf": 0.25,
            "iou": 0.7,
            "max_det": 300,
            "verbose": False,
            "save": False,
        }
        self.model: Any = None

    def cold(self, files: list[Path]) -> float:
        started = time.perf_counter()
        self.model = self.yolo(str(self.weights))
        self._predict(files)
        if self.weights.name.endswith("_openvino_model"):
            # compiled as the server's cpu lane compiles it: its threads, and f32 unless half
            from yolo_orch.runners.formats import compile_openvino_for_lane

            compile_openvino_for_lane(self.model, self.weights, self.threads, self.half)
            self._predict(files)
        return time.perf_counter() - started

    def warm(self, files: list[Path]) -> float:
        started = time.perf_counter()
        self._predict(files)
        return time.perf_counter() - started

    def _predict(self, files: list[Path]) -> None:
        self.torch.set_num_threads(self.threads)  # what the server sets on its CPU lane
        images = [self.imread(f) for f in files]
        for result in self.model.predict(source=images, stream=True, **self.settings):
            _ = result.boxes  # consume like the server does


if __name__ == "__main__":
    main()
