"""Decoding live video for `stream` jobs: OpenCV's FFmpeg backend or PyAV, and what a capture does
when its camera goes away.

    python -m bench.stream_decode [--frames 600] [--streams 1] [--loss]

Decoding: each source is read on a thread of its own (`--streams` of them at once, one camera
each), every frame turned into a BGR numpy array (what a model is fed), by
`cv2.VideoCapture(url, cv2.CAP_FFMPEG)` and by PyAV (`av.open`, `frame.to_ndarray("bgr24")`), each
with its default decoder threads, one after the other in the same run. Sources: the loopback RTSP
camera (`RtspServer`, H.264 640x480@15, so wall fps is the camera's) and a generated 640x480 mp4
(mp4v) decoded as fast as it goes. Opening and the first frame are left out; the clock runs over
the next `--frames` frames. CPU is this process's (`time.process_time`: every thread, FFmpeg's
own included; the RTSP server is another process). PyAV is not a dependency: `pip install av` to
measure it; without it its rows say so.

--loss: how long `read()` takes to fail, and `VideoCapture(...)` to give up opening, when the
camera ends (its sockets closed: the RTSP server SIGKILLed, the MJPEG server stopped) or pauses
(sockets open, nothing sent: a frozen camera or a cut network), for RTSP and MJPEG, without and
with `CAP_PROP_OPEN_TIMEOUT_MSEC` / `CAP_PROP_READ_TIMEOUT_MSEC`. The untimed pauses wait out
OpenCV's own default: minutes.
"""

from __future__ import annotations

import argparse
import importlib.util
import tempfile
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from yolo_orch.testing.streams import MjpegServer, RtspServer, rtsp_unavailable
from yolo_orch.testing.video import make_video

Frames = Callable[[str], Generator[np.ndarray]]
"""Opens a source and yields its frames as BGR arrays, until the source ends."""


def opencv_frames(url: str) -> Generator[np.ndarray]:
    capture = cv2.VideoCapture(url, cv2.CAP_FFMPEG)
    try:
        while True:
            ok, frame = capture.read()
            if not ok:
                return
            yield frame
    finally:
        capture.release()


def pyav_frames(url: str) -> Generator[np.ndarray]:
    import av

    with av.open(url) as container:
        for frame in container.decode(video=0):
            yield frame.to_ndarray(format="bgr24")


@dataclass
class Row:
    source: str
    decoder: str
    frames: int
    wall_s: float
    cpu_s: float

    def line(self) -> str:
        fps = self.frames / self.wall_s
        cpu_ms = self.cpu_s / self.frames * 1000
        busy = self.cpu_s / self.wall_s * 100
        return (
            f"{self.source:<6} {self.decoder:<7} {self.frames:>6} {fps:>9.1f} "
            f"{self.cpu_s:>7.2f} {cpu_ms:>12.2f} {busy:>8.0f}%"
        )


HEADER = "source decoder  frames  wall fps   cpu s cpu ms/frame  cpu/wall"


def measure(source: str, decoder: str, frames: Frames, urls: list[str], count: int) -> Row:
    """Each url decoded on its own thread; the clocks run from when every thread has its first
    frame until all have `count` more."""
    started = threading.Barrier(len(urls) + 1)
    decoded = [0] * len(urls)

    def decode(index: int, url: str) -> None:
        stream = frames(url)
        try:
            next(stream, None)
        finally:
            started.wait()
        for _frame in stream:
            decoded[index] += 1
            if decoded[index] == count:
                break
        stream.close()

    threads = [threading.Thread(target=decode, args=(index, url)) for index, url in enumerate(urls)]
    for thread in threads:
        thread.start()
    started.wait()
    wall, cpu = time.perf_counter(), time.process_time()
    for thread in threads:
        thread.join()
    return Row(source, decoder, sum(decoded), time.perf_counter() - wall, time.process_time() - cpu)


def decoding(frames: int, streams: int) -> None:
    decoders: list[tuple[str, Frames | None]] = [("opencv", opencv_frames)]
    decoders.append(("pyav", pyav_frames if importlib.util.find_spec("av") else None))
    rows: list[Row] = []
    print(HEADER)
    with tempfile.TemporaryDirectory() as folder:
        clip = Path(folder) / "clip.mp4"
        # one extra frame: the one read before the clocks start
        make_video(clip, frames=frames + 1, size=(640, 480), fps=15.0)
        sources = {"mp4": [str(clip)] * streams}
        reason = rtsp_unavailable()
        camera = None if reason else RtspServer(mounts=streams)
        if camera is None:
            print(f"rtsp: skipped, {reason}")
        else:
            camera.start()
            sources = {"rtsp": [camera.url(i) for i in range(streams)], **sources}
        try:
            for source, urls in sources.items():
                for name, decoder in decoders:
                    if decoder is None:
                        print(f"{source:<6} {name:<7} PyAV not installed: skipped")
                        continue
                    rows.append(measure(source, name, decoder, urls, frames))
                    print(rows[-1].line(), flush=True)
        finally:
            if camera is not None:
                camera.stop()
    ratios(rows)


def ratios(rows: list[Row]) -> None:
    by_side = {(row.source, row.decoder): row for row in rows}
    for source in dict.fromkeys(row.source for row in rows):
        opencv, pyav = by_side.get((source, "opencv")), by_side.get((source, "pyav"))
        if opencv and pyav:
            cpu = (pyav.cpu_s / pyav.frames) / (opencv.cpu_s / opencv.frames)
            fps = (pyav.frames / pyav.wall_s) / (opencv.frames / opencv.wall_s)
            print(f"{source}: pyav/opencv cpu per frame {cpu:.2f}x, wall fps {fps:.2f}x")


TIMEOUTS = {
    "default": [],
    "3000 ms": [cv2.CAP_PROP_OPEN_TIMEOUT_MSEC, 3000, cv2.CAP_PROP_READ_TIMEOUT_MSEC, 3000],
    "1000 ms": [cv2.CAP_PROP_OPEN_TIMEOUT_MSEC, 1000, cv2.CAP_PROP_READ_TIMEOUT_MSEC, 1000],
}


def loss(kind: str, event: str, timeouts: str) -> str:
    """One capture reading a fresh camera that then ends or pauses: seconds until `read()`
    fails (the frames it still returns first), then seconds until a new `VideoCapture` gives up."""
    params = TIMEOUTS[timeouts]
    server: RtspServer | MjpegServer = RtspServer() if kind == "rtsp" else MjpegServer()
    with server:
        url = server.url() if isinstance(server, RtspServer) else server.url
        capture = cv2.VideoCapture(url, cv2.CAP_FFMPEG, params)
        try:
            for _ in range(10):
                capture.read()
            lost_at = time.perf_counter()
            if event == "pause":
                server.pause()
            elif isinstance(server, RtspServer):
                server.kill()
            else:
                server.stop()
            after = 0
            while capture.read()[0]:
                after += 1
            failed_s = time.perf_counter() - lost_at
        finally:
            capture.release()
        opening = time.perf_counter()
        reopened = cv2.VideoCapture(url, cv2.CAP_FFMPEG, params)
        opened, open_s = reopened.isOpened(), time.perf_counter() - opening
        reopened.release()
        if event == "pause":
            server.resume()
    return (
        f"{kind:<6} {event:<6} {timeouts:<8} read fails after {failed_s:6.2f} s "
        f"({after} frames first); reopen: {'opened' if opened else 'fails'} after {open_s:5.2f} s"
    )


def losses() -> None:
    kinds = ["mjpeg"] if rtsp_unavailable() else ["rtsp", "mjpeg"]
    for kind in kinds:
        for event in ("end", "pause"):
            for timeouts in TIMEOUTS:
                print(loss(kind, event, timeouts), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=600, help="frames per stream and side")
    parser.add_argument("--streams", type=int, default=1, help="cameras decoded at once")
    parser.add_argument("--loss", action="store_true", help="measure lost sources instead")
    args = parser.parse_args()
    if args.loss:
        losses()
    else:
        decoding(args.frames, args.streams)


if __name__ == "__main__":
    main()
