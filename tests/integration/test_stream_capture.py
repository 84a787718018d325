"""A source's capture thread against scripted sources: only the newest taken frame is kept (the
others counted as dropped, never queued), `max_fps` bounds what is taken, a lost source is
reopened with backoff until `give_up_s`, and a local video loops."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from yolo_orch.domain.streams import StreamHealth
from yolo_orch.runners.stream_capture import Capture, open_video
from yolo_orch.testing import wait_for
from yolo_orch.testing.video import make_video


class ScriptedSource:
    """A network source that yields `frames` frames (one per `interval_s`), then fails."""

    def __init__(self, frames: int, interval_s: float = 0.001, opens: bool = True) -> None:
        self._left = frames
        self._interval_s = interval_s
        self._opens = opens

    def isOpened(self) -> bool:
        return self._opens

    def grab(self) -> bool:
        time.sleep(self._interval_s)
        self._left -= 1
        return self._left >= 0

    def retrieve(self) -> tuple[bool, Any]:
        return True, np.zeros((4, 4, 3), dtype=np.uint8)

    def get(self, prop: int) -> float:
        return 0.0

    def set(self, prop: int, value: float) -> bool:
        return False

    def release(self) -> None:
        pass


def capture(opened: list[ScriptedSource], **options: Any) -> Capture:
    """A capture whose opens take the next of `opened` (the last one again once they run out)."""
    sources = iter(opened)
    last = opened[-1]

    def open_source(url: str) -> ScriptedSource:
        return next(sources, last)

    settings: dict[str, Any] = {"max_fps": 1000.0, "give_up_s": 60.0, **options}
    return Capture(
        0,
        "rtsp://cam/1",
        "rtsp://cam/1",
        on_frame=lambda: None,
        open_source=open_source,
        **settings,
    )


def test_frames_the_lane_does_not_reach_are_dropped_not_queued() -> None:
    source = capture([ScriptedSource(frames=50), ScriptedSource(frames=10**9, interval_s=0.01)])
    source.start()
    wait_for(lambda: source.frames_read >= 50, 10, "50 frames read")
    taken = source.take()
    assert taken is not None
    assert taken.number >= 50
    assert source.take() is None  # nothing else was kept
    assert source.frames_dropped >= 45
    source.stop()
    source.join(5)


def test_max_fps_bounds_the_frames_taken() -> None:
    source = capture([ScriptedSource(frames=10**9, interval_s=0.002)], max_fps=10.0)
    source.start()
    wait_for(lambda: source.frames_read >= 300, 10, "300 frames read")
    source.stop()
    source.join(5)
    seconds = source.frames_read * 0.002
    assert source.frames_taken <= 10 * seconds * 1.5 + 2
    assert source.frames_taken < source.frames_read / 5


def test_a_lost_source_is_reconnected_then_given_up() -> None:
    never = ScriptedSource(frames=0, opens=False)
    source = capture([ScriptedSource(frames=5), never], give_up_s=1.5)
    source.start()
    wait_for(lambda: source.health is StreamHealth.RECONNECTING, 5, "reconnecting")
    wait_for(lambda: source.health is StreamHealth.SOURCE_LOST, 10, "given up")
    source.join(5)
    # backoff from 0.5 s, doubling, with jitter: a few tries in 1.5 s, not a busy loop
    assert 1 <= source.reconnects <= 6
    assert source.down_s >= 1.5


def test_a_source_back_in_time_is_live_again() -> None:
    source = capture(
        [
            ScriptedSource(frames=5),
            ScriptedSource(frames=0, opens=False),
            ScriptedSource(frames=10**9, interval_s=0.01),
        ]
    )
    source.start()
    wait_for(
        lambda: source.reconnects >= 2 and source.health is StreamHealth.LIVE, 10, "live again"
    )
    source.stop()
    source.join(5)


def test_a_local_video_loops_at_its_own_rate(tmp_path: Path) -> None:
    video = tmp_path / "clip.mp4"
    make_video(video, frames=10, size=(64, 48), fps=50)
    ready = threading.Event()
    source = Capture(
        0,
        str(video),
        "clip.mp4",
        max_fps=1000.0,
        give_up_s=5.0,
        on_frame=ready.set,
        open_source=open_video,
    )
    source.start()
    wait_for(lambda: source.frames_read > 25, 10, "past the end of the video, twice")
    assert source.health is StreamHealth.LIVE
    assert source.reconnects == 0
    source.stop()
    source.join(5)
    assert ready.is_set()
