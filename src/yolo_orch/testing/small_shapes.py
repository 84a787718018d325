"""Small objects in large images, for sliced inference's tests and `bench.slicing`: a detector
trained on 128-pixel images of the demo's shapes, large images made of many unseen such images
(their shapes' boxes known), and the recall of a result entry against those boxes.

Call `ensure_ultralytics` before `train_shape_detector` (offline, safe load)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

CELL = 128
"""The side of the training images, and of each cell of a large image."""
OBJECT_FRACTION = (0.12, 0.22)
"""Shapes of 15-28 pixels."""


def train_shape_detector(folder: Path, images: int = 300, epochs: int = 6) -> Path:
    """yolo11n trained on `images` 128-pixel images at imgsz 128 (~60 s on 2 CPU cores; fewer
    images or epochs find next to nothing at conf 0.1); its best checkpoint."""
    from ultralytics.models import YOLO

    from yolo_orch.demo.dataset import DatasetSpec, make_dataset

    spec = DatasetSpec(train=images, val=16, test=0, size=CELL, object_fraction=OBJECT_FRACTION)
    data = make_dataset(folder / "tiles", spec)
    YOLO("yolo11n.yaml").train(
        data=str(data),
        epochs=epochs,
        imgsz=CELL,
        batch=16,
        lr0=0.003,
        optimizer="AdamW",
        device="cpu",
        workers=0,
        plots=False,
        project=str(folder / "runs"),
        name="tiles",
        seed=0,
        deterministic=True,
        verbose=False,
    )
    return folder / "runs" / "tiles" / "weights" / "best.pt"


def large_shape_image(
    folder: Path, across: int = 16, down: int = 12, seed: int = 1
) -> tuple[Path, list[tuple[float, float, float, float, int]]]:
    """`folder/large-{seed}.png`: `across` x `down` unseen 128-pixel images side by side (16x12:
    2048x1536), and its shapes' boxes (x1, y1, x2, y2, class id) in its own coordinates."""
    import cv2
    import numpy as np

    from yolo_orch.demo.dataset import DatasetSpec, make_dataset

    cells = across * down
    spec = DatasetSpec(
        train=0, val=0, test=cells, size=CELL, seed=seed, object_fraction=OBJECT_FRACTION
    )
    source = folder / f"cells-{seed}"
    make_dataset(source, spec)
    canvas = np.zeros((down * CELL, across * CELL, 3), np.uint8)
    truth: list[tuple[float, float, float, float, int]] = []
    for cell in range(cells):
        row, column = divmod(cell, across)
        stem = f"test_{cell:04d}"
        x0, y0 = column * CELL, row * CELL
        pixels = cv2.imread(str(source / "images/test" / f"{stem}.png"))
        if pixels is None:
            raise FileNotFoundError(f"{stem}.png was not written")
        canvas[y0 : y0 + CELL, x0 : x0 + CELL] = pixels
        for line in (source / "labels/test" / f"{stem}.txt").read_text().splitlines():
            class_id, cx, cy, w, h = (float(value) for value in line.split())
            x1, y1 = x0 + (cx - w / 2) * CELL, y0 + (cy - h / 2) * CELL
            truth.append((x1, y1, x1 + w * CELL, y1 + h * CELL, int(class_id)))
    path = folder / f"large-{seed}.png"
    cv2.imwrite(str(path), canvas)
    return path, truth


def recall(
    detections: list[Any], truth: list[tuple[float, float, float, float, int]]
) -> tuple[int, int]:
    """How many of the true shapes a detection of their class covers with IoU 0.5 or more, of
    how many. `detections`: result entries' (`box` and `class_id`)."""
    found = [
        ([float(d["box"][k]) for k in ("x1", "y1", "x2", "y2")], int(d["class_id"]))
        for d in detections
    ]
    hits = 0
    for tx1, ty1, tx2, ty2, class_id in truth:
        for (x1, y1, x2, y2), found_class in found:
            overlap = max(0.0, min(x2, tx2) - max(x1, tx1)) * max(0.0, min(y2, ty2) - max(y1, ty1))
            union = (x2 - x1) * (y2 - y1) + (tx2 - tx1) * (ty2 - ty1) - overlap
            if found_class == class_id and overlap >= 0.5 * union:
                hits += 1
                break
    return hits, len(truth)
