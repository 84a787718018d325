"""Generated videos of moving shapes, written with OpenCV (mp4v), tiny so that tests stay quick.

`make_video` returns, per frame, the true box of every object: a test can feed those to the
tracker directly and know how many tracks there must be.
"""

from __future__ import annotations

from pathlib import Path

Box = tuple[float, float, float, float]

COLOURS = ((60, 60, 230), (60, 220, 60), (230, 80, 40), (200, 200, 40))


def make_video(
    path: Path,
    frames: int = 40,
    size: tuple[int, int] = (160, 120),
    objects: int = 2,
    fps: float = 30.0,
    seed: int = 0,
) -> list[list[Box]]:
    """Write `frames` frames of `objects` filled rectangles gliding across a noisy background;
    returns each frame's boxes (x1, y1, x2, y2), one per object, in object order."""
    import cv2
    import numpy as np

    width, height = size
    rng = np.random.default_rng(seed)
    box_w, box_h = width // 6, height // 5
    starts = [
        (int(rng.integers(0, width - box_w)), int(rng.integers(0, height - box_h)))
        for _ in range(objects)
    ]
    speeds = [(int(rng.integers(1, 3)) * (1 if i % 2 else -1), 1) for i in range(objects)]
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"mp4v"), fps, size)
    if not writer.isOpened():
        raise RuntimeError(f"cannot write {path}")
    truth: list[list[Box]] = []
    try:
        for frame in range(frames):
            image = rng.integers(0, 60, size=(height, width, 3), dtype=np.uint8)
            boxes: list[Box] = []
            for i, ((x0, y0), (dx, dy)) in enumerate(zip(starts, speeds, strict=True)):
                x = _bounce(x0 + dx * frame, width - box_w)
                y = _bounce(y0 + dy * frame, height - box_h)
                colour = COLOURS[i % len(COLOURS)]
                cv2.rectangle(image, (x, y), (x + box_w, y + box_h), colour, thickness=-1)
                boxes.append((float(x), float(y), float(x + box_w), float(y + box_h)))
            writer.write(image)
            truth.append(boxes)
    finally:
        writer.release()
    return truth


def _bounce(position: int, limit: int) -> int:
    """`position` folded into 0..limit, as a shape bouncing off the edges."""
    period = 2 * limit
    folded = position % period
    return folded if folded <= limit else period - folded


def frame_count(path: Path) -> int:
    """Frames OpenCV decodes from the file, counted by reading them all."""
    import cv2

    capture = cv2.VideoCapture(str(path))
    count = 0
    try:
        while capture.grab():
            count += 1
    finally:
        capture.release()
    return count
