"""A loopback RTSP camera for tests and benchmarks, served by GStreamer's RTSP server.

Run by the SYSTEM Python (`/usr/bin/python3`, whose `gi` has the GstRtspServer typelib; the
project's venv has no `gi`), so this file must not import yolo_orch: it ships inside the package
only so that `yolo_orch.testing.streams` can find it by path.

    /usr/bin/python3 rtsp_server.py --port 8554 [--mounts 2] [--file clip.avi]

Serves rtsp://127.0.0.1:PORT/cam0 ... /cam{K-1}: H.264 (x264, low latency, a keyframe every
second so that a reconnecting client decodes within about a second) of either a moving test
pattern or a video file decoded and looped. Each mount is shared: every client of a mount gets
the same encoder's output, as from a real camera. Prints `READY <port>` once listening; exits on
SIGTERM/SIGINT.

The file must be one that the installed plugins decode: MJPEG in AVI (OpenCV's `MJPG` writer)
needs only the good plugins; OpenCV's mp4 (`mp4v`) needs gstreamer1.0-libav, and H.264 the bad
plugins (openh264dec) or libav. A file that cannot be decoded fails start-up, before READY.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402 - after require_version

APPSRC_NAME = "frames"


def encoder(fps: int) -> str:
    """Raw video in, RTP H.264 out (the payloader must be named pay0 for the RTSP server)."""
    return (
        f"videoconvert ! video/x-raw,format=I420 "
        f"! x264enc tune=zerolatency speed-preset=ultrafast key-int-max={fps} "
        f"! rtph264pay name=pay0 pt=96 config-interval=1"
    )


def raw_caps(width: int, height: int, fps: int) -> str:
    return f"video/x-raw,format=I420,width={width},height={height},framerate={fps}/1"


class LoopedFile:
    """Decodes a video file in real time, seeking back to its start at the end, and pushes each
    frame into the media pipelines of the mount's current clients.

    The decoder runs from start-up, whether or not anyone watches (a live camera does not wait
    for viewers); the shared media's `appsrc` stamps frames as they arrive, so the seek back to
    the start never makes timestamps go backwards on the wire.
    """

    def __init__(self, path: str, caps: str) -> None:
        self.pipeline = Gst.parse_launch(
            f"filesrc name=file ! decodebin ! videoconvert ! videoscale ! videorate ! {caps} "
            "! appsink name=sink sync=true emit-signals=true"
        )
        self.pipeline.get_by_name("file").set_property("location", path)
        self.sources: set[Any] = set()
        self.failed = False
        self.lock = threading.Lock()
        sink = self.pipeline.get_by_name("sink")
        sink.connect("new-sample", self.on_sample)
        bus = self.pipeline.get_bus()
        bus.add_signal_watch()
        bus.connect("message::eos", self.on_end)
        bus.connect("message::error", self.on_error)

    def start(self, loop: Any) -> None:
        """Pre-rolls the decoder so that a file it cannot decode fails start-up (before READY),
        then plays it; a later decoding error ends `loop`, and with it the server."""
        self.loop = loop
        self.pipeline.set_state(Gst.State.PAUSED)
        result, _state, _pending = self.pipeline.get_state(10 * Gst.SECOND)
        if result == Gst.StateChangeReturn.FAILURE:
            message = self.pipeline.get_bus().pop_filtered(Gst.MessageType.ERROR)
            sys.exit(f"cannot decode the file: {describe(message)}")
        self.pipeline.set_state(Gst.State.PLAYING)

    def stop(self) -> None:
        self.pipeline.set_state(Gst.State.NULL)

    def attach(self, media: Any) -> None:
        source = media.get_element().get_by_name(APPSRC_NAME)
        with self.lock:
            self.sources.add(source)
        media.connect("unprepared", lambda _media: self.detach(source))

    def detach(self, source: Any) -> None:
        with self.lock:
            self.sources.discard(source)

    def on_sample(self, sink: Any) -> Gst.FlowReturn:
        buffer = sink.emit("pull-sample").get_buffer().copy()
        buffer.pts = buffer.dts = Gst.CLOCK_TIME_NONE  # the appsrc stamps it (do-timestamp)
        with self.lock:
            sources = list(self.sources)
        for source in sources:
            source.emit("push-buffer", buffer)
        return Gst.FlowReturn.OK

    def on_end(self, _bus: Any, _message: Any) -> None:
        self.pipeline.seek_simple(Gst.Format.TIME, Gst.SeekFlags.FLUSH, 0)

    def on_error(self, _bus: Any, message: Any) -> None:
        print(f"decoding failed: {describe(message)}", file=sys.stderr, flush=True)
        self.failed = True
        self.loop.quit()


def describe(message: Any) -> str:
    if message is None:
        return "no error message"
    error, debug = message.parse_error()
    return f"{error.message} ({debug})"


def mount_factory(args: argparse.Namespace) -> tuple[Any, LoopedFile | None]:
    factory = GstRtspServer.RTSPMediaFactory()
    caps = raw_caps(args.width, args.height, args.fps)
    looped: LoopedFile | None = None
    if args.file is None:
        source = f"videotestsrc is-live=true pattern=ball ! {caps}"
    else:
        looped = LoopedFile(args.file, caps)
        # leaky: a stalled encoder drops old frames instead of queueing them without bound
        source = (
            f"appsrc name={APPSRC_NAME} is-live=true do-timestamp=true format=time "
            f'caps="{caps}" max-buffers=2 leaky-type=downstream'
        )
        factory.connect("media-configure", lambda _factory, media: looped.attach(media))
    factory.set_launch(f"( {source} ! {encoder(args.fps)} )")
    factory.set_shared(True)
    return factory, looped


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mounts", type=int, default=1)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=480)
    parser.add_argument("--fps", type=int, default=15)
    parser.add_argument("--file", help="a video file to loop instead of the test pattern")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    Gst.init(None)
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(str(args.port))
    mounts = server.get_mount_points()
    looped_files: list[LoopedFile] = []
    for index in range(args.mounts):
        factory, looped = mount_factory(args)
        mounts.add_factory(f"/cam{index}", factory)
        if looped is not None:
            looped_files.append(looped)
    if server.attach(None) == 0:
        sys.exit(f"cannot listen on 127.0.0.1:{args.port}")
    loop = GLib.MainLoop()
    for looped in looped_files:
        looped.start(loop)
    for signum in (signal.SIGTERM, signal.SIGINT):
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signum, loop.quit)
    print(f"READY {args.port}", flush=True)
    try:
        loop.run()
    finally:
        for looped in looped_files:
            looped.stop()
    if any(looped.failed for looped in looped_files):
        sys.exit(1)


if __name__ == "__main__":
    main()
