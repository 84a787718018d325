"""Sliced inference on the CPU (`params.slice`): a detector trained on 128-pixel images of small
shapes finds them in a large image made of many such images when it is sliced, and misses them
when the whole image is letterboxed to imgsz; its boxes are in the large image's coordinates.
Segment and obb models' entries come back as whole-image ones do, masks and rotated boxes in the
image, with the annotated image at its full size."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from yolo_orch.demo.dataset import DatasetSpec, make_dataset
from yolo_orch.registry.weights import ResolvedWeights, sha256_file
from yolo_orch.runners.inference import YoloInferenceRunner
from yolo_orch.testing.yolo import (
    RecordingContext,
    build_task_checkpoint,
    ensure_ultralytics,
    fixed_resolver,
)

TILE = 128
"""The side of the training images, and of each cell of the large image."""
GRID = (16, 12)
"""Cells across and down: a 2048x1536 image."""
SLICED = {"size": 256, "overlap": 0.2, "merge": "nms", "iou": 0.5, "include_full": False}
"""Tiles at imgsz 256: the shapes keep the size the model was trained on."""
IMGSZ = 256


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> ResolvedWeights:
    """yolo11n trained for a few epochs on 128-pixel images with 15-28 pixel shapes (~60 s on 2
    cores; fewer images or epochs find nothing at conf 0.1)."""
    ensure_ultralytics(tmp_path_factory.getbasetemp())  # before ultralytics is imported
    from ultralytics.models import YOLO

    base = tmp_path_factory.mktemp("slicing")
    spec = DatasetSpec(train=300, val=16, test=0, size=TILE, object_fraction=(0.12, 0.22))
    data = make_dataset(base / "tiles", spec)
    model = YOLO("yolo11n.yaml")
    model.train(
        data=str(data),
        epochs=6,
        imgsz=TILE,
        batch=16,
        lr0=0.003,
        optimizer="AdamW",
        device="cpu",
        workers=0,
        plots=False,
        project=str(base / "runs"),
        name="tiles",
        seed=0,
        deterministic=True,
        verbose=False,
    )
    path = base / "runs" / "tiles" / "weights" / "best.pt"
    return ResolvedWeights(path, sha256_file(path))


@pytest.fixture(scope="module")
def large_image(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    """A 2048x1536 image of 16x12 unseen 128-pixel images, and its shapes' boxes and classes
    (x1 y1 x2 y2 class) in its own coordinates."""
    folder = tmp_path_factory.mktemp("large")
    cells = GRID[0] * GRID[1]
    make_dataset(
        folder / "cells",
        DatasetSpec(train=0, val=0, test=cells, size=TILE, seed=1, object_fraction=(0.12, 0.22)),
    )
    canvas = np.zeros((GRID[1] * TILE, GRID[0] * TILE, 3), np.uint8)
    truth = []
    for cell in range(cells):
        row, column = divmod(cell, GRID[0])
        stem = f"test_{cell:04d}"
        pixels = cv2.imread(str(folder / "cells" / "images" / "test" / f"{stem}.png"))
        x0, y0 = column * TILE, row * TILE
        canvas[y0 : y0 + TILE, x0 : x0 + TILE] = pixels
        labels = (folder / "cells" / "labels" / "test" / f"{stem}.txt").read_text().split("\n")
        for line in filter(None, labels):
            class_id, cx, cy, w, h = (float(value) for value in line.split())
            truth.append(
                [
                    x0 + (cx - w / 2) * TILE,
                    y0 + (cy - h / 2) * TILE,
                    x0 + (cx + w / 2) * TILE,
                    y0 + (cy + h / 2) * TILE,
                    class_id,
                ]
            )
    path = folder / "large.png"
    cv2.imwrite(str(path), canvas)
    return path, np.array(truth)


def _run(weights: ResolvedWeights, image: Path, workdir: Path, **params: Any) -> Any:
    runner = YoloInferenceRunner(fixed_resolver({"model": weights}), data_roots=[image.parent])
    context = RecordingContext().context(workdir, [image], model="model", **params)
    return runner.run(context).detail["images"][0]


def _recall(entry: dict[str, Any], truth: np.ndarray) -> float:
    """The share of true shapes some detection of their class covers with IoU 0.5 or more."""
    found = [
        ([d["box"][k] for k in ("x1", "y1", "x2", "y2")], d["class_id"])
        for d in entry["detections"]
    ]
    hits = 0
    for *box, class_id in truth:
        for (x1, y1, x2, y2), found_class in found:
            ix = max(0.0, min(x2, box[2]) - max(x1, box[0]))
            iy = max(0.0, min(y2, box[3]) - max(y1, box[1]))
            union = (x2 - x1) * (y2 - y1) + (box[2] - box[0]) * (box[3] - box[1]) - ix * iy
            if found_class == class_id and ix * iy >= 0.5 * union:
                hits += 1
                break
    return hits / len(truth)


def test_sliced_finds_the_small_shapes_whole_image_inference_misses(
    trained: ResolvedWeights, large_image: tuple[Path, np.ndarray], tmp_path: Path
) -> None:
    image, truth = large_image
    params = {"imgsz": IMGSZ, "max_det": 1000, "conf": 0.1}
    whole = _run(trained, image, tmp_path / "whole", **params)
    sliced = _run(trained, image, tmp_path / "sliced", slice=SLICED, save_annotated=True, **params)

    assert (sliced["width"], sliced["height"]) == (GRID[0] * TILE, GRID[1] * TILE)
    whole_recall, sliced_recall = _recall(whole, truth), _recall(sliced, truth)
    # measured: 0.72 sliced, 0.0 whole (the shapes are 2-3 pixels at imgsz)
    assert sliced_recall >= 0.5, (sliced_recall, whole_recall)
    assert whole_recall <= 0.1, (sliced_recall, whole_recall)
    for detection in sliced["detections"]:
        box = detection["box"]
        assert 0 <= box["x1"] < box["x2"] <= sliced["width"]
        assert 0 <= box["y1"] < box["y2"] <= sliced["height"]
    annotated = cv2.imread(str(tmp_path / "sliced" / "artifacts" / sliced["annotated"]))
    assert annotated.shape[:2] == (GRID[1] * TILE, GRID[0] * TILE)


@pytest.mark.parametrize(
    ("task", "merge"), [("segment", "nmm"), ("segment", "nms"), ("obb", "nms")]
)
def test_segment_and_obb_entries_are_in_the_full_image(
    task: str, merge: str, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    path = build_task_checkpoint(tmp_path / f"{task}.pt", task, ("a", "b"))
    weights = ResolvedWeights(path, sha256_file(path))
    image = tmp_path / "wide.png"
    cv2.imwrite(str(image), np.random.default_rng(0).integers(0, 255, (200, 330, 3), np.uint8))
    slicing = {"size": 96, "overlap": 0.2, "merge": merge, "iou": 0.5, "include_full": True}
    entry = _run(weights, image, tmp_path / "run", imgsz=96, max_det=20, slice=slicing)

    assert (entry["width"], entry["height"]) == (330, 200)
    assert 0 < len(entry["detections"]) <= 20
    confidences = [d["confidence"] for d in entry["detections"]]
    assert confidences == sorted(confidences, reverse=True)
    for detection in entry["detections"]:
        if task == "obb":
            assert 0 <= detection["obb"]["cx"] <= 330
            assert 0 <= detection["obb"]["cy"] <= 200
            continue
        box = detection["box"]
        assert 0 <= box["x1"] < box["x2"] <= 330
        assert 0 <= box["y1"] < box["y2"] <= 200
        points = [point for ring in detection["mask"]["polygons"] for point in ring]
        assert points
        for x, y in points:  # the mask lies in its box, in the image's coordinates
            assert box["x1"] - 1 <= x <= box["x2"] + 1
            assert box["y1"] - 1 <= y <= box["y2"] + 1
