"""Live video sources on loopback, for the tests and benchmarks of `stream` jobs.

- `RtspServer`: H.264 over RTSP from GStreamer's RTSP server (`rtsp_server.py`, run by the
  system Python: Debian's `python3-gi`, `gir1.2-gst-rtsp-server-1.0` and the base, good and ugly
  plugins; `rtsp_unavailable()` says what is missing where they are not installed);
- `MjpegServer`: `multipart/x-mixed-replace` JPEG frames over HTTP, generated here with numpy
  and OpenCV (needs only the `yolo` extra).

Both can be stopped or killed and started again on the same port, so a test can watch a client
lose its camera and get it back; and paused, connections held open but silent, as a frozen camera
or a cut network looks to a client (which then only learns of it from its own read timeout).
"""

from __future__ import annotations

import abc
import contextlib
import functools
import http.server
import selectors
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from yolo_orch.testing.server import free_port

__all__ = ["MjpegServer", "RtspServer", "StreamSourceFailed", "rtsp_unavailable"]

SYSTEM_PYTHON = Path("/usr/bin/python3")
RTSP_SCRIPT = Path(__file__).with_name("rtsp_server.py")
STARTUP_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0

_PROBE = """
import gi
gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import Gst, GstRtspServer
Gst.init(None)
missing = [name for name in ("videotestsrc", "x264enc", "rtph264pay", "decodebin")
           if Gst.ElementFactory.find(name) is None]
print("missing GStreamer elements: " + ", ".join(missing) if missing else "ok")
"""


class StreamSourceFailed(RuntimeError):
    """A video source could not be started; the message carries its stderr."""


@functools.cache
def rtsp_unavailable() -> str | None:
    """Why `RtspServer` cannot run on this machine, or None when it can. Asked of the system
    Python once per process: the venv's interpreter has no `gi`."""
    if not SYSTEM_PYTHON.exists():
        return f"no {SYSTEM_PYTHON} (the RTSP server runs on the system Python's gi)"
    try:
        probe = subprocess.run(
            [str(SYSTEM_PYTHON), "-c", _PROBE], capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        return "probing GStreamer timed out"
    if probe.returncode != 0:
        last_line = (probe.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        return f"the system Python cannot load GStreamer's RTSP server: {last_line}"
    answer = probe.stdout.strip()
    return None if answer == "ok" else answer


class _Source(abc.ABC):
    """A test source: started on entering a `with`, stopped on leaving it."""

    @abc.abstractmethod
    def start(self) -> None: ...

    @abc.abstractmethod
    def stop(self) -> None: ...

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


class RtspServer(_Source):
    """`rtsp_server.py` as a subprocess: `mounts` cameras at rtsp://127.0.0.1:{port}/cam{i}."""

    def __init__(
        self,
        mounts: int = 1,
        width: int = 640,
        height: int = 480,
        fps: int = 15,
        file: Path | None = None,
        port: int | None = None,
    ) -> None:
        self.mounts = mounts
        self.width = width
        self.height = height
        self.fps = fps
        self.file = file
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self.last_stderr = ""
        """The tail of the server's stderr, read when it last ended."""

    def start(self) -> None:
        """Launches the server and returns once it listens (its `READY` line)."""
        if self.process is not None:
            raise RuntimeError("already started")
        command = [
            str(SYSTEM_PYTHON),
            str(RTSP_SCRIPT),
            f"--port={self.port}",
            f"--mounts={self.mounts}",
            f"--width={self.width}",
            f"--height={self.height}",
            f"--fps={self.fps}",
        ]
        if self.file is not None:
            command.append(f"--file={self.file}")
        # stderr to a file, never a pipe: a chatty GStreamer must not block on a full pipe
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()/kill()
        self.process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._stderr
        )
        if not self._wait_ready(self.process):
            self.kill()
            raise StreamSourceFailed(f"RTSP server did not start: {self.last_stderr}")

    def _wait_ready(self, process: subprocess.Popen[bytes]) -> bool:
        assert process.stdout is not None
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while (left := deadline - time.monotonic()) > 0:
                if not selector.select(left):
                    continue
                line = process.stdout.readline()
                if not line:  # the process ended
                    return False
                if line.split() == [b"READY", str(self.port).encode()]:
                    return True
        return False

    def url(self, i: int = 0) -> str:
        return f"rtsp://127.0.0.1:{self.port}/cam{i}"

    def url_with_credentials(self, user: str, password: str, i: int = 0) -> str:
        """The same camera with `user:password@` in the URL. The server checks no credentials
        (FFmpeg connects all the same): the URL exists to test that secrets are redacted."""
        return f"rtsp://{user}:{password}@127.0.0.1:{self.port}/cam{i}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """SIGTERM, as an orderly camera shutdown; SIGKILL if it has not ended in time."""
        self._end(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL: the camera vanishes mid-stream, without an RTSP TEARDOWN."""
        self._end(signal.SIGKILL)

    def pause(self) -> None:
        """Freezes the server (SIGSTOP): its connections stay open, nothing is sent."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, signum: signal.Signals) -> None:
        if self.process is None:
            raise RuntimeError("not started")
        self.process.send_signal(signum)

    def restart(self) -> None:
        """Stops the server if it runs, then starts it again on the same port and mounts."""
        self.stop()
        self.start()

    def _end(self, signum: signal.Signals) -> None:
        process, self.process = self.process, None
        if process is not None:
            if process.poll() is None:
                process.send_signal(signum)
                process.send_signal(signal.SIGCONT)  # a paused server acts on SIGTERM only then
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            assert process.stdout is not None
            process.stdout.close()
        self.last_stderr = self._read_stderr()

    def _read_stderr(self) -> str:
        if self._stderr is None:
            return self.last_stderr
        self._stderr.seek(0)
        text = self._stderr.read().decode(errors="replace")[-4000:]
        self._stderr.close()
        self._stderr = None
        return text


class MjpegServer(_Source):
    """An HTTP MJPEG camera at http://127.0.0.1:{port}/stream.mjpg: a filled rectangle gliding
    across a plain background, `fps` frames a second, the same frame to every client at a time.

    `stop()` closes the open connections too (a client sees its stream end), and `start()` serves
    again on the same port. `pause()` keeps the connections open but sends nothing until
    `resume()`.
    """

    PATH = "/stream.mjpg"
    BOUNDARY = "frame"

    def __init__(
        self, width: int = 640, height: int = 480, fps: float = 15.0, port: int | None = None
    ) -> None:
        self.width = width
        self.height = height
        self.fps = fps
        self.port = port or free_port()
        self._frames: list[bytes] = []
        self.paused = threading.Event()
        self._httpd: _MjpegHttpServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.PATH}"

    def start(self) -> None:
        if self._httpd is not None:
            raise RuntimeError("already started")
        if not self._frames:
            self._frames = render_frames(self.width, self.height)
        self._httpd = _MjpegHttpServer(self, ("127.0.0.1", self.port))
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, name=f"mjpeg-{self.port}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stops listening, ends every open stream, and waits for their threads."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()  # the accept loop; the streams are ended by close_streams
        httpd.close_streams()
        httpd.server_close()  # joins the handler threads (daemon_threads is False)
        if self._thread is not None:
            self._thread.join()

    def pause(self) -> None:
        self.paused.set()

    def resume(self) -> None:
        self.paused.clear()

    def frame(self, at: float) -> bytes:
        """The JPEG shown at `at` (seconds on the monotonic clock)."""
        return self._frames[int(at * self.fps) % len(self._frames)]


def render_frames(width: int, height: int, step: int = 8) -> list[bytes]:
    """One back-and-forth cycle of a rectangle crossing the frame, `step` pixels a frame, as
    JPEGs: encoded once, so that serving many clients costs no encoding."""
    import cv2
    import numpy as np

    box_w, box_h = width // 5, height // 4
    top = (height - box_h) // 2
    lefts = list(range(0, width - box_w, step))
    frames: list[bytes] = []
    for left in lefts + lefts[::-1]:
        image = np.full((height, width, 3), (90, 90, 90), dtype=np.uint8)
        cv2.rectangle(image, (left, top), (left + box_w, top + box_h), (40, 40, 220), -1)
        ok, encoded = cv2.imencode(".jpg", image)
        if not ok:
            raise StreamSourceFailed("OpenCV could not encode a JPEG")
        frames.append(encoded.tobytes())
    return frames


class _MjpegHttpServer(http.server.ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins the streams it has ended

    def __init__(self, source: MjpegServer, address: tuple[str, int]) -> None:
        self.source = source
        self.stopping = threading.Event()
        self.streams: set[socket.socket] = set()
        self.streams_lock = threading.Lock()
        super().__init__(address, _MjpegHandler)

    def close_streams(self) -> None:
        self.stopping.set()
        with self.streams_lock:
            for connection in self.streams:
                # shutdown, not close: it wakes a send blocked on a slow client, and the handler
                # thread still owns the socket
                with contextlib.suppress(OSError):  # the client already closed it
                    connection.shutdown(socket.SHUT_RDWR)


class _MjpegHandler(http.server.BaseHTTPRequestHandler):
    server: _MjpegHttpServer

    def do_GET(self) -> None:
        if self.path != MjpegServer.PATH:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header(
            "Content-Type", f"multipart/x-mixed-replace; boundary={MjpegServer.BOUNDARY}"
        )
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        with self.server.streams_lock:
            self.server.streams.add(self.connection)
        try:
            self._stream()
        except OSError:  # the client left, or stop() shut the socket
            pass
        finally:
            with self.server.streams_lock:
                self.server.streams.discard(self.connection)
            self.close_connection = True

    def _stream(self) -> None:
        source = self.server.source
        period = 1.0 / source.fps
        next_at = time.monotonic()
        while not self.server.stopping.is_set():
            if not source.paused.is_set():
                jpeg = source.frame(next_at)
                self.wfile.write(
                    f"--{MjpegServer.BOUNDARY}\r\nContent-Type: image/jpeg\r\n"
                    f"Content-Length: {len(jpeg)}\r\n\r\n".encode()
                    + jpeg
                    + b"\r\n"
                )
            next_at += period
            self.server.stopping.wait(max(0.0, next_at - time.monotonic()))

    def log_message(self, format: str, *args: object) -> None:
        """Silent: tests read frames, not access logs."""
