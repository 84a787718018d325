"""How many live cameras one lane sustains: yolo-orch's `stream` jobs against ultralytics' own
multi-stream loop, on the same cameras, model, image size and torch threads, in one run.

    python -m bench.streams [--max-cameras 16] [--seconds 20] [--fps 3] [--imgsz 320]
                            [--threads 1] [--max-det 20] [--device cpu]

Cameras: `RtspServer` on loopback, H.264 640x480 at 15 fps (x264 in another process, on the same
cores, for both sides alike). Model: `build_checkpoint`'s yolo11n, random weights (it finds class
0 everywhere: `max_det` bounds the detections per frame, on both sides).

N steps up (1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64, up to `--max-cameras`) until both sides fail:

- yolo-orch: one server for the whole run (`lanes=["<device>"]`, `cpu_threads`, streams per lane
  and stream fps per lane large enough, `stream_allowed_hosts=["127.0.0.1"]`, the default
  `batch_max_images`), one stream job per camera with `max_fps` F. Once every job is live and
  warm, the window of `--seconds` starts. Per camera: the frames whose capture time falls in the
  window, read from the job's JSON Lines segments (each line carries `captured_at` and
  `latency_ms`, capture to result); frames dropped: `frames_dropped` of its progress, at the
  window's end less at its start.
- ultralytics: a child process (spawned, so its threads and memory are its own) runs
  `YOLO(path).predict(source=<a .streams file of the N URLs>, stream=True, imgsz, vid_stride)`,
  with `vid_stride = round(15 / F)`, so each camera offers about F frames a second.
  `LoadStreams.update` is wrapped: it reads through a proxy of its `cv2.VideoCapture` whose
  `retrieve()` returns the frame as an ndarray subclass stamped with `time.monotonic()` (and
  counts it as taken); `LoadStreams.__next__` is wrapped to record the batch's stamps (one frame
  per camera) before handing plain arrays on. Each result's latency is its yield time less its
  frame's stamp. The same window (after a warm-up), by capture time; dropped: frames taken in the
  window less those processed.

Sustained: every camera's processed fps >= 0.95 x offered (min(F, 15) for yolo-orch, 15 /
vid_stride for ultralytics) and p99 latency < 500 ms. CPU over the window, in % of one core:
`cpu` the side's process (the server, or the child), `cams` the cameras' RTSP server (x264),
`host` every core of the host busy, whoever ran (200 % on two cores): what is left of `host`
after the two is other work on a shared host. Nothing is asserted.

GPU variant: `--device cuda:0` (yolo11n, `--max-cameras 64`, aiming at >= 32 cameras; torch
threads 1 on both sides, as the server's CUDA lanes use). Not run on the benchmarks' machine,
which has no GPU.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import tempfile
import time
from collections.abc import Callable, Generator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from bench._server import percentile
from bench._yolo import MODEL, real_server, workspace
from yolo_orch.testing import Server, wait_for
from yolo_orch.testing.server import read_cpu_s
from yolo_orch.testing.streams import RtspServer, rtsp_unavailable

CAMERA_FPS = 15
STEPS = (1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64)
SUSTAINED_SHARE = 0.95
P99_LIMIT_MS = 500.0
WARM_UP_S = 6.0
LIVE_TIMEOUT_S = 120.0


Readings = tuple[float, ...]


def cpu_readings(pid: int, camera_pid: int) -> Readings:
    """CPU seconds so far of the measured process (every thread), of the cameras' server, and
    of the whole host's cores busy (/proc/stat, whoever ran)."""
    ticks = [int(value) for value in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    busy = (sum(ticks[:8]) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # less idle, iowait
    return read_cpu_s(pid), read_cpu_s(camera_pid), busy


def elapsed(before: Readings, after: Readings) -> Readings:
    return tuple(end - start for start, end in zip(before, after, strict=True))


@dataclass
class Side:
    """One side's figures at N cameras, over the window."""

    name: str
    cameras: int
    offered: float
    """Frames per second each camera offers the model."""
    seconds: float
    taken: list[int] = field(default_factory=list)
    """Per camera: frames taken from the decoder in the window."""
    processed: list[int] = field(default_factory=list)
    dropped: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    cpu: Readings = (0.0, 0.0, 0.0)
    """Over the window (`cpu_readings`, end less start)."""
    error: str = ""

    def fps(self, counts: list[int]) -> float:
        return sum(counts) / len(counts) / self.seconds if counts else 0.0

    @property
    def slowest_fps(self) -> float:
        return min(self.processed, default=0) / self.seconds

    @property
    def sustained(self) -> bool:
        return (
            not self.error
            and len(self.processed) == self.cameras
            and self.slowest_fps >= SUSTAINED_SHARE * self.offered
            and bool(self.latencies_ms)
            and percentile(self.latencies_ms, 0.99) < P99_LIMIT_MS
        )

    def line(self) -> str:
        own, cameras, busy = self.cpu
        if self.error:
            return f"{self.name:<11} {self.cameras:>4}  failed: {self.error}"
        p50, p99 = (
            (percentile(self.latencies_ms, 0.5), percentile(self.latencies_ms, 0.99))
            if self.latencies_ms
            else (math.nan, math.nan)
        )
        return (
            f"{self.name:<11} {self.cameras:>4} {self.offered:>8.2f} {self.fps(self.taken):>8.2f} "
            f"{self.fps(self.processed):>9.2f} {self.slowest_fps:>8.2f} {self.dropped:>8} "
            f"{p50:>8.0f} {p99:>8.0f} {own / self.seconds:>6.0%} {cameras / self.seconds:>6.0%} "
            f"{busy / self.seconds:>6.0%} {'yes' if self.sustained else 'no':>5}"
        )


HEADER = (
    f"{'side':<11} {'cams':>4} {'offered':>8} {'taken':>8} {'processed':>9} {'slowest':>8} "
    f"{'dropped':>8} {'p50 ms':>8} {'p99 ms':>8} {'cpu':>6} {'cams':>6} {'host':>6} {'sust.':>5}"
)


def stream_job(url: str, fps: float, imgsz: int, max_det: int) -> dict[str, Any]:
    params = {"max_fps": fps, "imgsz": imgsz, "max_det": max_det}
    return {"kind": "stream", "model": MODEL, "sources": [url], "params": params}


def progress_sources(client: httpx.Client, job_id: str) -> list[dict[str, Any]]:
    job = client.get(f"/v1/jobs/{job_id}").json()
    if job["state"] not in ("queued", "running"):
        raise RuntimeError(f"stream {job_id} ended {job['state']}: {job.get('error')}")
    sources: list[dict[str, Any]] = ((job.get("progress") or {}).get("detail") or {}).get(
        "sources", []
    )
    return sources


def segment_frames(server: Server, job_id: str) -> list[dict[str, Any]]:
    """The frames the job wrote (its segments under the server's jobs folder)."""
    folder = server.data_dir / "jobs" / job_id / "segments"
    texts = (path.read_text() for path in sorted(folder.glob("*.jsonl")))
    return [
        json.loads(line)
        for text in texts
        for line in text.splitlines(keepends=True)
        if line.endswith("\n")
    ]


def wait_ended(client: httpx.Client, job_id: str) -> None:
    def ended() -> bool:
        state = client.get(f"/v1/jobs/{job_id}").json()["state"]
        return state not in ("queued", "running")

    wait_for(ended, LIVE_TIMEOUT_S, f"stream {job_id} ended")


def yolo_orch_side(server: Server, urls: list[str], args: argparse.Namespace) -> Side:
    side = Side("yolo-orch", len(urls), min(args.fps, CAMERA_FPS), args.seconds)
    with server.client(timeout=30) as client:
        jobs = []
        for url in urls:
            response = client.post(
                "/v1/jobs", json=stream_job(url, args.fps, args.imgsz, args.max_det)
            )
            if response.status_code != 202:
                raise RuntimeError(f"stream refused: {response.status_code} {response.text}")
            jobs.append(response.json()["id"])
        try:
            wait_for(
                lambda: all(
                    any(s["frames_processed"] > 0 for s in progress_sources(client, job_id))
                    for job_id in jobs
                ),
                LIVE_TIMEOUT_S,
                "every stream live with a frame processed",
            )
            time.sleep(WARM_UP_S)
            dropped_before = [progress_sources(client, job_id)[0] for job_id in jobs]
            started_unix, before = time.time(), cpu_readings(server.pid, args.camera_pid)
            time.sleep(args.seconds)
            side.cpu = elapsed(before, cpu_readings(server.pid, args.camera_pid))
            ended_unix = time.time()
            dropped_after = [progress_sources(client, job_id)[0] for job_id in jobs]
            time.sleep(1.0)  # the frames captured just before the end reach their segments
        finally:
            for job_id in jobs:
                client.post(f"/v1/jobs/{job_id}/cancel")
            for job_id in jobs:
                wait_ended(client, job_id)
    side.dropped = sum(
        after["frames_dropped"] - before["frames_dropped"]
        for before, after in zip(dropped_before, dropped_after, strict=True)
    )
    rates = [after["fps_in"] for after in dropped_after]  # taken per s, the last 5 s
    side.taken = [round(rate * args.seconds) for rate in rates]
    for job_id in jobs:
        frames = [
            frame
            for frame in segment_frames(server, job_id)
            if started_unix <= frame["captured_at"] < ended_unix
        ]
        side.processed.append(len(frames))
        side.latencies_ms += [float(frame["latency_ms"]) for frame in frames]
    return side


# --- ultralytics' own loop, in a spawned child ---------------------------------------------


def stamped_loader_hooks() -> Callable[[], list[float]]:
    """Wrap ultralytics' `LoadStreams` (see the module docstring); returns what gives the
    capture stamps of the batch last handed to the predictor."""
    import numpy as np
    from ultralytics.data.loaders import LoadStreams

    class Stamped(np.ndarray):
        captured: float = math.nan

    class StampingCapture:
        """`LoadStreams.update`'s capture, stamping what `retrieve()` returns."""

        def __init__(self, capture: Any, taken: list[float]) -> None:
            self._capture = capture
            self._taken = taken

        def retrieve(self) -> tuple[bool, Any]:
            ok, image = self._capture.retrieve()
            if ok and image is not None:
                stamped = image.view(Stamped)
                stamped.captured = time.monotonic()
                self._taken.append(stamped.captured)
                return ok, stamped
            return ok, image

        def __getattr__(self, name: str) -> Any:
            return getattr(self._capture, name)

    original_update: Any = LoadStreams.update
    original_next: Any = LoadStreams.__next__
    batch: list[float] = []

    def update(self: Any, i: int, capture: Any, stream: Any) -> None:
        original_update(self, i, StampingCapture(capture, TAKEN.setdefault(i, [])), stream)

    def next_batch(self: Any) -> tuple[list[str], list[Any], list[str]]:
        sources, images, info = original_next(self)
        batch[:] = [float(getattr(image, "captured", math.nan)) for image in images]
        return sources, [np.asarray(image) for image in images], info

    setattr(LoadStreams, "update", update)  # noqa: B010 - mypy refuses assigning a method
    setattr(LoadStreams, "__next__", next_batch)  # noqa: B010
    return lambda: batch


TAKEN: dict[int, list[float]] = {}
"""In the child: per camera, the capture stamps of the frames its reader took."""


def ultralytics_run(
    weights: str,
    urls: list[str],
    args: dict[str, Any],
    config_base: str,
) -> dict[str, Any]:
    """The child's work: predict on the N streams for warm-up + `seconds`; per result, its
    camera, capture stamp and latency."""
    from yolo_orch.testing.yolo import ensure_ultralytics

    ensure_ultralytics(Path(config_base))  # offline and quiet, before ultralytics is imported
    import torch
    from ultralytics.models import YOLO

    torch.set_num_threads(args["threads"])
    last_batch = stamped_loader_hooks()
    with tempfile.TemporaryDirectory() as folder:
        listing = Path(folder) / "cameras.streams"
        listing.write_text("\n".join(urls) + "\n")
        model = YOLO(weights)
        results = model.predict(
            source=str(listing),
            stream=True,
            imgsz=args["imgsz"],
            vid_stride=args["vid_stride"],
            max_det=args["max_det"],
            device=args["device"],
            verbose=False,
        )
        done: list[tuple[int, float, float]] = []
        start = end = math.inf
        at_start: Readings = (0.0, 0.0, 0.0)
        at_end = at_start
        for count, _ in enumerate(results):
            now = time.monotonic()
            camera = count % len(urls)
            done.append((camera, last_batch()[camera], now))
            if start == math.inf:  # the first result: the model is loaded, every camera open
                start = now + args["warm_up_s"]
                end = start + args["seconds"]
            if now >= start and not at_start[2]:
                at_start = cpu_readings(os.getpid(), args["camera_pid"])
            if now >= end and not at_end[2]:
                at_end = cpu_readings(os.getpid(), args["camera_pid"])
            if now >= end + 1.0 and camera == len(urls) - 1:  # frames captured before the end
                break
        if isinstance(results, Generator):  # stream=True: it is; closing ends the readers
            results.close()
    return {
        "window": (start, end),
        "done": done,
        "taken": {camera: stamps for camera, stamps in TAKEN.items()},
        "cpu": elapsed(at_start, at_end),
    }


def ultralytics_side(weights: Path, urls: list[str], args: argparse.Namespace) -> Side:
    stride = max(1, round(CAMERA_FPS / args.fps))
    side = Side("ultralytics", len(urls), CAMERA_FPS / stride, args.seconds)
    settings = {**vars(args), "vid_stride": stride, "warm_up_s": WARM_UP_S}
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as child:
        out = child.submit(
            ultralytics_run, str(weights), urls, settings, str(weights.parent.parent)
        ).result()
    start, end = out["window"]
    in_window = [
        (camera, captured, ended)
        for camera, captured, ended in out["done"]
        if start <= captured < end
    ]
    side.processed = [sum(1 for c, _, _ in in_window if c == camera) for camera in range(len(urls))]
    side.taken = [
        sum(1 for stamp in out["taken"].get(camera, []) if start <= stamp < end)
        for camera in range(len(urls))
    ]
    side.dropped = sum(side.taken) - sum(side.processed)
    side.latencies_ms = [(ended - captured) * 1000 for _, captured, ended in in_window]
    side.cpu = out["cpu"]
    return side


def measured(run: Callable[[], Side], name: str, cameras: int, args: argparse.Namespace) -> Side:
    try:
        return run()
    except Exception as error:  # a side that cannot run at N fails N, and says why
        return Side(name, cameras, 0.0, args.seconds, error=f"{type(error).__name__}: {error}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu, or cuda:0 for the GPU variant")
    parser.add_argument("--max-cameras", type=int, default=None)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--fps", type=float, default=3.0, help="max_fps of each camera's job")
    parser.add_argument("--imgsz", type=int, default=None)
    parser.add_argument("--max-det", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None, help="torch threads of both sides")
    args = parser.parse_args()
    gpu = args.device != "cpu"
    lane_kind = "cuda" if gpu else "cpu"
    args.max_cameras = args.max_cameras or (64 if gpu else 16)
    args.imgsz = args.imgsz or (640 if gpu else 320)
    # the server's defaults: all cores but one on the cpu lane, 1 on a CUDA lane
    args.threads = args.threads or (1 if gpu else max(1, (os.cpu_count() or 2) - 1))
    if (why := rtsp_unavailable()) is not None:
        raise SystemExit(f"no RTSP cameras here: {why}")
    print(
        f"device {args.device}, torch threads {args.threads} (both sides), imgsz {args.imgsz}, "
        f"max_fps F={args.fps:g} (ultralytics vid_stride {max(1, round(CAMERA_FPS / args.fps))}), "
        f"max_det {args.max_det}, cameras 640x480@{CAMERA_FPS} H.264 RTSP, "
        f"{args.seconds:g} s a step after {WARM_UP_S:g} s warm"
    )
    best = {"yolo-orch": 0, "ultralytics": 0}
    with (
        workspace({}) as ws,
        RtspServer(mounts=args.max_cameras, width=640, height=480, fps=CAMERA_FPS) as cameras,
        real_server(
            ws,
            lanes=[args.device],
            cpu_threads=args.threads,
            streams_per_lane={lane_kind: args.max_cameras},
            stream_fps_per_lane={lane_kind: args.max_cameras * args.fps * 2},
            stream_allowed_hosts=["127.0.0.1"],
        ) as server,
    ):
        assert cameras.process is not None
        args.camera_pid = cameras.process.pid
        print(HEADER)
        for n in (n for n in STEPS if n <= args.max_cameras):
            urls = [cameras.url(i) for i in range(n)]
            ours = measured(partial(yolo_orch_side, server, urls, args), "yolo-orch", n, args)
            theirs = measured(
                partial(ultralytics_side, ws.weights, urls, args), "ultralytics", n, args
            )
            for side in (ours, theirs):
                print(side.line(), flush=True)
                if side.sustained:
                    best[side.name] = max(best[side.name], n)
            if not ours.sustained and not theirs.sustained:
                break
    ratio = best["yolo-orch"] / best["ultralytics"] if best["ultralytics"] else math.inf
    print(
        f"\nlargest N sustained: yolo-orch {best['yolo-orch']}, ultralytics "
        f"{best['ultralytics']}; yolo-orch/ultralytics {ratio:.2f}"
    )


if __name__ == "__main__":
    main()
