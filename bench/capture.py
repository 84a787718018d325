"""What capture costs a stream: its sustained frame rate with and without capturing every frame,
on the same cameras, model and server, in one run.

    python -m bench.capture [--cameras 2] [--seconds 20] [--rounds 2] [--every-n 1]
                            [--imgsz 320] [--max-det 20]

Cameras: `RtspServer` on loopback, H.264 640x480 at 15 fps. Model: `build_checkpoint`'s yolo11n,
random weights (it finds class 0 everywhere: `max_det` bounds the detections per frame). One
server for the whole run (`lanes=["cpu"]`, its default `cpu_threads`), one stream job per
camera with `max_fps` 15: more than one cpu lane sustains for two cameras here, so the rate
measured is the lane's, not the cameras'.

Each round runs the jobs twice, one after the other: without capture, and with
`capture: {into, when: {every_n: N}, max_total: 1000000}` (`--every-n`; 1: every frame
captured, the worst case: a JPEG encode, a label file, an image file and a sidecar per frame;
a rule on confidence captures far fewer), in turn first and
second from one round to the next. Each job ends by itself (`end_s`). Over a window of
`--seconds` that starts `WARM_UP_S` after its first frame: the frames processed per second, all
cameras together (the frames whose capture time falls in the window, from the job's segments),
and their capture-to-result latency; with capture, what its summary says over the whole job.

The headline: frames/s with capture over frames/s without, each round and over all rounds
(target >= 0.95). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench._server import percentile
from bench._yolo import MODEL, real_server, workspace
from bench.streams import segment_frames
from yolo_orch.files.managed_datasets import ManagedDatasets
from yolo_orch.testing import Server, wait_for
from yolo_orch.testing.streams import RtspServer, rtsp_unavailable
from yolo_orch.testing.yolo import CLASS_NAMES

CAMERA_FPS = 15
WARM_UP_S = 6.0
LOAD_MARGIN_S = 15.0
"""What a job may take to load its model and open its cameras, past its window (`end_s`)."""
DATASET = "bench-capture"
TARGET = 0.95


@dataclass
class Side:
    name: str
    seconds: float
    frames: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    capture: dict[str, int] | None = None
    error: str = ""

    @property
    def fps(self) -> float:
        return self.frames / self.seconds

    def line(self) -> str:
        if self.error:
            return f"{self.name:<16} failed: {self.error}"
        p50, p99 = percentile(self.latencies_ms, 0.5), percentile(self.latencies_ms, 0.99)
        captured = "" if self.capture is None else _shown(self.capture)
        return f"{self.name:<16} {self.fps:>8.2f} {p50:>8.0f} {p99:>8.0f}  {captured}"


HEADER = f"{'side':<16} {'frames/s':>8} {'p50 ms':>8} {'p99 ms':>8}  capture (whole jobs)"


def _shown(capture: dict[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in capture.items())


def stream_job(url: str, args: argparse.Namespace, capture: bool) -> dict[str, Any]:
    params: dict[str, Any] = {
        "max_fps": CAMERA_FPS,
        "imgsz": args.imgsz,
        "max_det": args.max_det,
        "snapshot_every_s": 0,
        "end_s": WARM_UP_S + args.seconds + LOAD_MARGIN_S,
    }
    if capture:
        params["capture"] = {
            "into": DATASET,
            "when": {"every_n": args.every_n},
            "max_total": 1_000_000,
        }
    return {"kind": "stream", "model": MODEL, "sources": [url], "params": params}


def run_side(
    server: Server, urls: list[str], args: argparse.Namespace, *, capture: bool, name: str
) -> Side:
    side = Side(name, args.seconds)
    with server.client(timeout=30) as client:
        jobs = []
        for url in urls:
            response = client.post("/v1/jobs", json=stream_job(url, args, capture))
            if response.status_code != 202:
                raise RuntimeError(f"stream refused: {response.status_code} {response.text}")
            jobs.append(response.json()["id"])
        ended = [_ended(client, job_id) for job_id in jobs]
    failed = [job for job in ended if job["state"] != "succeeded"]
    if failed:
        side.error = f"a stream ended {failed[0]['state']}: {failed[0].get('error')}"
        return side
    frames = [frame for job_id in jobs for frame in segment_frames(server, job_id)]
    start = min(frame["captured_at"] for frame in frames) + WARM_UP_S
    end = start + args.seconds
    if max(frame["captured_at"] for frame in frames) < end:
        side.error = "the streams ended before the window did (raise LOAD_MARGIN_S)"
        return side
    in_window = [frame for frame in frames if start <= frame["captured_at"] < end]
    side.frames = len(in_window)
    side.latencies_ms = [float(frame["latency_ms"]) for frame in in_window]
    if capture:
        counts = [job["result"]["capture"] for job in ended]
        side.capture = {key: sum(count[key] for count in counts) for key in counts[0]}
    return side


def _ended(client: httpx.Client, job_id: str) -> dict[str, Any]:
    job: dict[str, Any] = {}

    def done() -> bool:
        nonlocal job
        job = client.get(f"/v1/jobs/{job_id}").json()
        return job["state"] not in ("queued", "running")

    wait_for(done, 600.0, f"stream {job_id} ended")
    return job


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cameras", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--every-n", type=int, default=1, help="capture every Nth frame")
    parser.add_argument("--imgsz", type=int, default=320)
    parser.add_argument("--max-det", type=int, default=20)
    args = parser.parse_args()
    if (why := rtsp_unavailable()) is not None:
        raise SystemExit(f"no RTSP cameras here: {why}")
    print(
        f"{args.cameras} camera(s) 640x480@{CAMERA_FPS} H.264 RTSP, max_fps {CAMERA_FPS} each, "
        f"imgsz {args.imgsz}, max_det {args.max_det}, one cpu lane; {args.seconds:g} s windows "
        f"after {WARM_UP_S:g} s warm; {args.rounds} round(s); capture every_n {args.every_n}"
    )
    totals = {"without": 0, "with": 0}
    with (
        workspace({}) as ws,
        RtspServer(mounts=args.cameras, width=640, height=480, fps=CAMERA_FPS) as cameras,
    ):
        datasets_dir = ws.data / "datasets"
        ManagedDatasets(datasets_dir).create(DATASET, "detect", CLASS_NAMES)
        with real_server(
            ws,
            lanes=["cpu"],
            datasets_dir=datasets_dir,
            streams_per_lane={"cpu": args.cameras},
            stream_fps_per_lane={"cpu": args.cameras * CAMERA_FPS * 2},
            stream_allowed_hosts=["127.0.0.1"],
        ) as server:
            urls = [cameras.url(i) for i in range(args.cameras)]
            print(HEADER)
            for round_number in range(1, args.rounds + 1):
                order = [False, True] if round_number % 2 else [True, False]
                sides = {}
                for capture in order:
                    label = "with" if capture else "without"
                    name = f"{round_number}: {label}"
                    sides[label] = run_side(server, urls, args, capture=capture, name=name)
                    print(sides[label].line(), flush=True)
                    time.sleep(2.0)  # the cameras' readers are closed before the next side
                if any(side.error for side in sides.values()):
                    continue
                ratio = sides["with"].fps / sides["without"].fps
                print(f"round {round_number}: with / without {ratio:.3f}", flush=True)
                for label, side in sides.items():
                    totals[label] += side.frames
    if totals["without"]:
        ratio = totals["with"] / totals["without"]
        met = "met" if ratio >= TARGET else "not met"
        print(f"all rounds: with / without {ratio:.3f} (target >= {TARGET}: {met})")


if __name__ == "__main__":
    main()
