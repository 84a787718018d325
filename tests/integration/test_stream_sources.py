"""The loopback cameras of `yolo_orch.testing.streams`, read the way `stream` jobs read cameras:
OpenCV's FFmpeg backend. Every capture is opened with open and read timeouts, so that a source
that stops answering fails the test instead of hanging it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import cv2
import numpy as np
import pytest

from tests.support.stream_sources import require_rtsp
from yolo_orch.testing.streams import MjpegServer, RtspServer, StreamSourceFailed

TIMEOUTS_MS = [cv2.CAP_PROP_OPEN_TIMEOUT_MSEC, 5000, cv2.CAP_PROP_READ_TIMEOUT_MSEC, 5000]
SHORT_TIMEOUTS_MS = [cv2.CAP_PROP_OPEN_TIMEOUT_MSEC, 1000, cv2.CAP_PROP_READ_TIMEOUT_MSEC, 1000]
"""For the captures that are meant to time out."""
MOST_BUFFERED_FRAMES = 200
"""More frames than FFmpeg can hold decoded or in its socket buffers once a source is gone."""

OpenCapture = Callable[[str], cv2.VideoCapture]


@pytest.fixture
def open_capture() -> Iterator[OpenCapture]:
    """`open_capture(url)`: an opened capture, released at teardown."""
    captures: list[cv2.VideoCapture] = []

    def open_(url: str) -> cv2.VideoCapture:
        capture = cv2.VideoCapture(url, cv2.CAP_FFMPEG, TIMEOUTS_MS)
        captures.append(capture)
        assert capture.isOpened(), url
        return capture

    yield open_
    for capture in captures:
        capture.release()


def read_frames(capture: cv2.VideoCapture, count: int) -> list[np.ndarray]:
    frames = []
    for _ in range(count):
        ok, frame = capture.read()
        assert ok
        frames.append(frame)
    return frames


def reads_until_failure(capture: cv2.VideoCapture) -> int:
    """The frames still read from a lost source before `read()` fails; fails the test if it
    never does."""
    for count in range(MOST_BUFFERED_FRAMES):
        ok, _frame = capture.read()
        if not ok:
            return count
    raise AssertionError(f"still reading {MOST_BUFFERED_FRAMES} frames after the source ended")


def assert_moving_640x480(frames: list[np.ndarray]) -> None:
    assert {frame.shape for frame in frames} == {(480, 640, 3)}
    first = frames[0].astype(np.int16)
    differences = [np.abs(frame.astype(np.int16) - first).mean() for frame in frames[1:]]
    assert max(differences) > 1.0, "every frame looks like the first: nothing moves"


def test_rtsp_serves_moving_640x480_frames(
    rtsp_server: RtspServer, open_capture: OpenCapture
) -> None:
    assert_moving_640x480(read_frames(open_capture(rtsp_server.url()), 20))


def test_rtsp_url_with_credentials_still_connects(
    rtsp_server: RtspServer, open_capture: OpenCapture
) -> None:
    url = rtsp_server.url_with_credentials("viewer", "s3cret")
    assert "viewer:s3cret@" in url
    read_frames(open_capture(url), 3)


def test_rtsp_reads_fail_after_kill_and_a_new_capture_reads_after_restart(
    rtsp_server: RtspServer, open_capture: OpenCapture
) -> None:
    before = open_capture(rtsp_server.url())
    read_frames(before, 5)
    rtsp_server.kill()
    reads_until_failure(before)

    rtsp_server.restart()
    assert_moving_640x480(read_frames(open_capture(rtsp_server.url()), 20))


def test_rtsp_reads_fail_on_a_paused_server_within_the_read_timeout(
    rtsp_server: RtspServer,
) -> None:
    capture = cv2.VideoCapture(rtsp_server.url(), cv2.CAP_FFMPEG, SHORT_TIMEOUTS_MS)
    try:
        read_frames(capture, 5)
        rtsp_server.pause()  # connections open, nothing sent: only the read timeout can tell
        reads_until_failure(capture)
    finally:
        capture.release()
        rtsp_server.resume()


def test_rtsp_mounts_serve_independently(open_capture: OpenCapture) -> None:
    require_rtsp()
    with RtspServer(mounts=2) as server:
        first, second = open_capture(server.url(0)), open_capture(server.url(1))
        read_frames(first, 5)
        read_frames(second, 5)
        first.release()  # the last client of cam0 leaves: cam1 streams on
        assert_moving_640x480(read_frames(second, 20))
        assert_moving_640x480(read_frames(open_capture(server.url(0)), 20))


def test_rtsp_loops_a_video_file(tmp_path: Path, open_capture: OpenCapture) -> None:
    require_rtsp()
    clip = write_mjpeg_avi(tmp_path / "clip.avi", frames=10)
    with RtspServer(file=clip) as server:
        # 40 frames of a 10-frame clip: only a loop has that many
        assert_moving_640x480(read_frames(open_capture(server.url()), 40))


def test_rtsp_start_failure_carries_the_servers_stderr(tmp_path: Path) -> None:
    require_rtsp()
    server = RtspServer(file=tmp_path / "missing.avi")
    with pytest.raises(StreamSourceFailed, match="No such file"):
        server.start()
    assert not server.running


def test_mjpeg_serves_moving_640x480_frames(
    mjpeg_server: MjpegServer, open_capture: OpenCapture
) -> None:
    assert_moving_640x480(read_frames(open_capture(mjpeg_server.url), 20))


def test_mjpeg_reads_fail_after_stop_and_a_new_capture_reads_after_start(
    mjpeg_server: MjpegServer, open_capture: OpenCapture
) -> None:
    before = open_capture(mjpeg_server.url)
    read_frames(before, 5)
    mjpeg_server.stop()
    reads_until_failure(before)

    mjpeg_server.start()
    assert_moving_640x480(read_frames(open_capture(mjpeg_server.url), 20))


def test_mjpeg_reads_fail_while_paused_and_resume_after(
    mjpeg_server: MjpegServer, open_capture: OpenCapture
) -> None:
    capture = cv2.VideoCapture(mjpeg_server.url, cv2.CAP_FFMPEG, SHORT_TIMEOUTS_MS)
    try:
        read_frames(capture, 5)
        mjpeg_server.pause()
        reads_until_failure(capture)
    finally:
        capture.release()
    mjpeg_server.resume()
    read_frames(open_capture(mjpeg_server.url), 5)


def write_mjpeg_avi(path: Path, frames: int) -> Path:
    """A clip GStreamer decodes with the good plugins alone (avidemux, jpegdec): OpenCV's mp4
    (MPEG-4 part 2) would need gstreamer1.0-libav."""
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), 15, (320, 240))
    try:
        for index in range(frames):
            image = np.full((240, 320, 3), 90, dtype=np.uint8)
            cv2.rectangle(image, (index * 20, 80), (index * 20 + 60, 160), (40, 40, 220), -1)
            writer.write(image)
    finally:
        writer.release()
    return path
