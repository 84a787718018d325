"""A small synthetic detection dataset the demo trains on: coloured shapes on cluttered backgrounds.

Each class is one shape in one colour (a red circle, a green square, a blue triangle), so a
detector that learns either cue learns the class; the backgrounds (a colour gradient, noise and
faint grey clutter) and the random sizes, positions and counts make it a detection task rather
than a colour lookup. Everything comes from one `numpy` generator seeded by the caller, so a seed
gives the same files byte for byte. Classes are dealt round-robin from a shuffled deck, so each
split holds them in equal numbers (within one).

The layout is what ultralytics reads: `images/<split>/*.png`, `labels/<split>/*.txt` with one
`class cx cy w h` line per object (normalised to the image), and a `data.yaml` naming the splits.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

__all__ = ["CLASS_NAMES", "SPLITS", "DatasetSpec", "make_dataset"]

CLASS_NAMES = ("circle", "square", "triangle")
_COLOURS = ((220, 40, 40), (40, 190, 60), (50, 80, 230))  # RGB: red, green, blue, one per class
SPLITS = ("train", "val", "test")


@dataclass(frozen=True)
class DatasetSpec:
    """How many images of which size; the object size is a fraction of the image side."""

    train: int = 600
    val: int = 60
    test: int = 12
    size: int = 128
    objects: tuple[int, int] = (2, 5)
    object_fraction: tuple[float, float] = (0.12, 0.34)
    seed: int = 0

    def count(self, split: str) -> int:
        counts = {"train": self.train, "val": self.val, "test": self.test}
        return counts[split]


@dataclass(frozen=True)
class _Box:
    class_id: int
    x1: float
    y1: float
    x2: float
    y2: float

    def overlaps(self, other: _Box, margin: float) -> bool:
        return not (
            self.x2 + margin <= other.x1
            or other.x2 + margin <= self.x1
            or self.y2 + margin <= other.y1
            or other.y2 + margin <= self.y1
        )

    def label(self, size: int) -> str:
        cx, cy = (self.x1 + self.x2) / 2 / size, (self.y1 + self.y2) / 2 / size
        w, h = (self.x2 - self.x1) / size, (self.y2 - self.y1) / size
        return f"{self.class_id} {cx:.6f} {cy:.6f} {w:.6f} {h:.6f}"


def make_dataset(root: Path, spec: DatasetSpec = DatasetSpec()) -> Path:
    """Write the dataset under `root` (made if missing; files of an earlier run are replaced)
    and return its `data.yaml`."""
    rng = np.random.default_rng(spec.seed)
    for split in SPLITS:
        images, labels = root / "images" / split, root / "labels" / split
        images.mkdir(parents=True, exist_ok=True)
        labels.mkdir(parents=True, exist_ok=True)
        deck = _ClassDeck(rng)
        for index in range(spec.count(split)):
            image, boxes = _draw_image(rng, spec, deck)
            stem = f"{split}_{index:04d}"
            image.save(images / f"{stem}.png", optimize=False)
            text = "".join(box.label(spec.size) + "\n" for box in boxes)
            (labels / f"{stem}.txt").write_text(text)
    data_yaml = root / "data.yaml"
    # JSON is YAML: no YAML writer is needed, and the names keep their order. Without `path`,
    # the splits are relative to the yaml's folder (for ultralytics and the server alike).
    data_yaml.write_text(
        json.dumps(
            {
                "train": "images/train",
                "val": "images/val",
                "test": "images/test",
                "names": list(CLASS_NAMES),
            },
            indent=2,
        )
        + "\n"
    )
    return data_yaml


class _ClassDeck:
    """Class ids forever, each round a shuffled run of every class, so counts stay balanced; an
    id that found no room in one image goes back on top for the next."""

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng
        self._pending: list[int] = []

    def take(self) -> int:
        if not self._pending:
            self._pending = [int(c) for c in self._rng.permutation(len(CLASS_NAMES))][::-1]
        return self._pending.pop()

    def put_back(self, class_id: int) -> None:
        self._pending.append(class_id)


def _draw_image(
    rng: np.random.Generator, spec: DatasetSpec, deck: _ClassDeck
) -> tuple[Image.Image, list[_Box]]:
    size = spec.size
    image = Image.fromarray(_background(rng, size))
    draw = ImageDraw.Draw(image)
    _clutter(rng, draw, size)
    boxes: list[_Box] = []
    wanted = int(rng.integers(spec.objects[0], spec.objects[1] + 1))
    for _ in range(wanted):
        class_id = deck.take()
        box = _place(rng, spec, class_id, boxes)
        if box is None:  # no room left in this image
            deck.put_back(class_id)
            break
        _draw_shape(rng, draw, box)
        boxes.append(box)
    return image, boxes


def _background(rng: np.random.Generator, size: int) -> np.ndarray:
    """A random linear gradient between two muted colours, with per-pixel noise."""
    start, end = rng.uniform(30, 200, 3), rng.uniform(30, 200, 3)
    angle = rng.uniform(0, 2 * np.pi)
    ys, xs = np.mgrid[0:size, 0:size] / size
    t = (np.cos(angle) * xs + np.sin(angle) * ys + 1) / 2
    pixels = start + (end - start) * t[..., None]
    pixels += rng.normal(0, rng.uniform(4, 18), (size, size, 3))
    image: np.ndarray = np.clip(pixels, 0, 255).astype(np.uint8)
    return image


def _clutter(rng: np.random.Generator, draw: ImageDraw.ImageDraw, size: int) -> None:
    """Faint grey lines and blobs: edges that are not objects."""
    for _ in range(int(rng.integers(2, 7))):
        grey = int(rng.integers(60, 200))
        x1, y1, x2, y2 = (int(value) for value in rng.integers(0, size, 4))
        if rng.random() < 0.5:
            draw.line((x1, y1, x2, y2), fill=(grey, grey, grey), width=int(rng.integers(1, 4)))
        else:
            draw.ellipse(
                (min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)), outline=(grey, grey, grey)
            )


def _place(
    rng: np.random.Generator, spec: DatasetSpec, class_id: int, taken: list[_Box]
) -> _Box | None:
    """A box that overlaps none already placed (a few tries), or None."""
    size = spec.size
    for _ in range(20):
        side = rng.uniform(*spec.object_fraction) * size
        x1, y1 = rng.uniform(0, size - side, 2)
        box = _Box(class_id, float(x1), float(y1), float(x1 + side), float(y1 + side))
        if not any(box.overlaps(other, margin=2.0) for other in taken):
            return box
    return None


def _draw_shape(rng: np.random.Generator, draw: ImageDraw.ImageDraw, box: _Box) -> None:
    # A little colour jitter, so the class is not one exact pixel value.
    colour = tuple(
        int(np.clip(channel + rng.integers(-25, 26), 0, 255)) for channel in _COLOURS[box.class_id]
    )
    corners = (box.x1, box.y1, box.x2, box.y2)
    if CLASS_NAMES[box.class_id] == "circle":
        draw.ellipse(corners, fill=colour)
    elif CLASS_NAMES[box.class_id] == "square":
        draw.rectangle(corners, fill=colour)
    else:  # an upright triangle whose base and apex touch the box's edges
        mid = (box.x1 + box.x2) / 2
        draw.polygon([(mid, box.y1), (box.x2, box.y2), (box.x1, box.y2)], fill=colour)
