"""One live source, read on a thread of its own: every frame is read (so the decoder stays at
the live edge), at most `max_fps` of them are taken, and only the newest taken frame is kept
for the lane: a frame the lane has not reached when a newer one is taken is counted as dropped,
never queued. A source that fails is reopened with exponential backoff and jitter, until it has
been down for `give_up_s`. A local video is played at its own frame rate, looped.

OpenCV's FFmpeg backend decodes (`bench/stream_decode.py` compares it with PyAV). Only the
source's shown name (credentials redacted) is ever logged."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from yolo_orch.domain.streams import StreamHealth, is_network_source
from yolo_orch.runners.stream_stats import Rate

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Pixels = NDArray[np.uint8]

log = logging.getLogger(__name__)

OPEN_TIMEOUT_MS = 5000
READ_TIMEOUT_MS = 3000
"""How long opening a network source, and reading a frame from it, may block: a camera that
stops sending is found lost within this, not never (FFmpeg's RTSP reader gives up after about
three times the read timeout: `bench/stream_decode.py --loss`)."""
STOP_WITHIN_S = 3 * READ_TIMEOUT_MS / 1000 + 1
"""How long a capture may take to stop: a read under way may have to time out first."""
BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 30.0


class VideoSource(Protocol):
    """What a capture reads (`cv2.VideoCapture`'s methods it uses)."""

    def isOpened(self) -> bool: ...

    def grab(self) -> bool: ...

    def retrieve(self) -> tuple[bool, Any]: ...

    def get(self, prop: int) -> float: ...

    def set(self, prop: int, value: float) -> bool: ...

    def release(self) -> None: ...


def open_video(url: str) -> VideoSource:
    import cv2

    if is_network_source(url):
        timeouts = [cv2.CAP_PROP_OPEN_TIMEOUT_MSEC, OPEN_TIMEOUT_MS]
        timeouts += [cv2.CAP_PROP_READ_TIMEOUT_MSEC, READ_TIMEOUT_MS]
        return cv2.VideoCapture(url, cv2.CAP_FFMPEG, timeouts)
    return cv2.VideoCapture(url, cv2.CAP_FFMPEG)


@dataclass(frozen=True)
class Frame:
    source: int
    number: int
    """Frames read from the source so far, this one included."""
    captured_at: float
    """Unix time, for clients."""
    captured: float
    """Monotonic, for the latency to its result."""
    pixels: Pixels


class Capture:
    def __init__(
        self,
        index: int,
        url: str,
        shown: str,
        *,
        max_fps: float,
        give_up_s: float,
        on_frame: Callable[[], None],
        open_source: Callable[[str], VideoSource] = open_video,
    ) -> None:
        self.index = index
        self.shown = shown
        self._url = url
        self._interval = 1.0 / max_fps
        self._give_up_s = give_up_s
        self._on_frame = on_frame
        self._open = open_source
        self._looped = not is_network_source(url)
        self._lock = threading.Lock()
        self._latest: Frame | None = None
        self._stop = threading.Event()
        self.health = StreamHealth.CONNECTING
        self.frames_read = 0
        self.frames_taken = 0
        self.frames_dropped = 0
        self.reconnects = 0
        self.down_s = 0.0
        self._taken = Rate()
        self._thread = threading.Thread(
            target=self._run, name=f"stream source {index}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)

    def take(self) -> Frame | None:
        """The newest frame not taken yet (the lane's), if any."""
        with self._lock:
            frame, self._latest = self._latest, None
        return frame

    def fps_in(self, now: float) -> float:
        """Frames taken per second, lately."""
        return self._taken.per_s(now)

    def _offer(self, frame: Frame) -> None:
        self._taken.add(frame.captured)
        with self._lock:
            if self._latest is not None:
                self.frames_dropped += 1
            self._latest = frame
            self.frames_taken += 1
        self._on_frame()

    def _run(self) -> None:
        backoff = BACKOFF_FIRST_S
        down_since: float | None = time.monotonic()
        while not self._stop.is_set():
            source = self._open(self._url)
            try:
                if source.isOpened():
                    if self.frames_read:
                        log.info("source %s is live again", self.shown)
                    self.health = StreamHealth.LIVE
                    down_since, backoff, self.down_s = None, BACKOFF_FIRST_S, 0.0
                    self._read(source)
            finally:
                source.release()
            if self._stop.is_set():
                return
            now = time.monotonic()
            if down_since is None:
                log.warning("source %s was lost; reconnecting", self.shown)
                down_since = now
            self.down_s = now - down_since
            if self.down_s >= self._give_up_s:
                self.health = StreamHealth.SOURCE_LOST
                log.error("source %s gave up after %.0f s down", self.shown, self.down_s)
                return
            if self.health is not StreamHealth.CONNECTING:
                self.health = StreamHealth.RECONNECTING
            self.reconnects += 1
            # full jitter: many cameras lost at once do not come back in step
            self._stop.wait(random.uniform(backoff / 2, backoff))
            backoff = min(backoff * 2, BACKOFF_MAX_S)

    def _read(self, source: VideoSource) -> None:
        """Read until the source fails or the capture stops; a local video starts over at its
        end, played at its own rate."""
        import cv2

        file_interval = 0.0
        if self._looped:
            fps = source.get(cv2.CAP_PROP_FPS)
            file_interval = 1.0 / fps if 0 < fps < 1000 else 1.0 / 25
        next_take = next_read = time.monotonic()
        rewound = False
        while not self._stop.is_set():
            if not source.grab():
                if self._looped and not rewound and source.set(cv2.CAP_PROP_POS_FRAMES, 0):
                    rewound = True  # its end: once more from the start
                    continue
                return
            rewound = False
            self.frames_read += 1
            now = time.monotonic()
            if now >= next_take:
                next_take = max(next_take + self._interval, now)
                ok, pixels = source.retrieve()
                if ok and pixels is not None:  # BGR, uint8
                    self._offer(Frame(self.index, self.frames_read, time.time(), now, pixels))
            if self._looped:
                next_read += file_interval
                self._stop.wait(max(0.0, next_read - time.monotonic()))
