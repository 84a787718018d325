"""Video files: which inputs are videos, what their containers declare, and which frames a job's
time window and stride take. OpenCV (FFmpeg) reads them; nothing here runs a model.

Imports OpenCV only when a video is opened: the API checks videos at submission where OpenCV is
installed (the `yolo` extra) and leaves them to the job otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from yolo_orch.errors import ErrorCode, InvalidJob

if TYPE_CHECKING:
    import cv2
    import numpy as np
    from numpy.typing import NDArray

__all__ = [
    "VIDEO_SUFFIXES",
    "FrameWindow",
    "VideoInfo",
    "is_video",
    "read_frames",
    "refuse_unreadable_videos",
    "video_info",
]

VIDEO_SUFFIXES = frozenset({".mp4", ".avi", ".mkv", ".mov"})
"""The containers video inputs may come in (by file name), all read by OpenCV's FFmpeg here."""


def is_video(path: Path) -> bool:
    return path.suffix.lower() in VIDEO_SUFFIXES


@dataclass(frozen=True)
class VideoInfo:
    width: int
    height: int
    fps: float
    frame_count: int | None
    """What the container declares (OpenCV's FFmpeg reader estimates it from the duration and
    frame rate where the container has no count); None when it says nothing."""


def video_info(capture: cv2.VideoCapture) -> VideoInfo | str:
    """What an opened capture says of its video, or why it cannot be read: a file that does not
    open, or has no frame size or frame rate."""
    import cv2

    if not capture.isOpened():
        return "cannot read the file as a video"
    width = int(capture.get(cv2.CAP_PROP_FRAME_WIDTH))
    height = int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT))
    fps = float(capture.get(cv2.CAP_PROP_FPS))
    count = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
    if width <= 0 or height <= 0:
        return "the video has no frame size"
    if not math.isfinite(fps) or fps <= 0:
        return "the video has no frame rate"
    return VideoInfo(width, height, fps, count if count > 0 else None)


def refuse_unreadable_videos(files: Iterable[Mapping[str, str]], max_pixels: int) -> None:
    """Refuse (`invalid_input`) a submission whose videos (`{"path", "name"}`, by file name)
    OpenCV cannot open or decode a first frame of, or whose frames have more than `max_pixels`
    (said by the container, before any frame is decoded). Without OpenCV installed they are left
    to the job, which checks them again. Blocking."""
    try:
        import cv2
    except ImportError:
        return
    for file in files:
        path = Path(file["path"])
        if not is_video(path):
            continue
        capture = cv2.VideoCapture(str(path))
        try:
            info = video_info(capture)
            if not isinstance(info, str) and info.width * info.height > max_pixels:
                info = f"its {info.width}x{info.height} frames have more than {max_pixels} pixels"
            if not isinstance(info, str) and not capture.grab():
                info = "the video has no frame that decodes"
        finally:
            capture.release()
        if isinstance(info, str):
            raise InvalidJob(f"input {file['name']!r}: {info}", code=ErrorCode.INVALID_INPUT)


@dataclass(frozen=True)
class FrameWindow:
    """Which frames of a video a job takes: from `first` up to (not including) `stop`, every
    `stride`th, at most `max_frames` of them."""

    first: int
    stop: int | None
    stride: int
    max_frames: int | None

    @classmethod
    def of(
        cls,
        fps: float,
        *,
        start_s: float,
        end_s: float | None,
        stride: int,
        max_frames: int | None,
    ) -> FrameWindow:
        """Frame `i` is at `i / fps` seconds; the window holds those at `start_s` or later and
        before `end_s`."""
        first = _frame_at(start_s, fps)
        stop = None if end_s is None else _frame_at(end_s, fps)
        return cls(first, stop, stride, max_frames)

    def planned(self, frame_count: int | None) -> int | None:
        """How many frames the window takes of a video of `frame_count` frames (None when that
        is unknown and nothing else bounds it)."""
        bounds = [end for end in (frame_count, self.stop) if end is not None]
        if not bounds:
            return self.max_frames
        frames = max(0, math.ceil((min(bounds) - self.first) / self.stride))
        return frames if self.max_frames is None else min(frames, self.max_frames)


def _frame_at(seconds: float, fps: float) -> int:
    """The first frame at or after `seconds` (a hair of float noise forgiven)."""
    return max(0, math.ceil(seconds * fps - 1e-6))


def read_frames(
    capture: cv2.VideoCapture, window: FrameWindow
) -> Iterator[tuple[int, NDArray[np.uint8]]]:
    """The window's frames, in order, as (frame index, BGR pixels). Frames outside it are only
    grabbed (demuxed), not converted; reading stops at the end of the video, or at a frame that
    does not decode."""
    index = taken = 0
    while window.max_frames is None or taken < window.max_frames:
        if window.stop is not None and index >= window.stop:
            return
        if not capture.grab():
            return
        if index >= window.first and (index - window.first) % window.stride == 0:
            ok, image = capture.retrieve()
            if not ok or image is None:
                return
            yield index, image  # type: ignore[misc]  # cv2 types pixels as MatLike
            taken += 1
        index += 1
