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

from yolo_orch.domain import JobResult
from yolo_orch.registry.weights import ResolvedWeights, sha256_file
from yolo_orch.runners.base import BatchRecord
from yolo_orch.runners.inference import YoloInferenceRunner
from yolo_orch.testing.small_shapes import large_shape_image, recall, train_shape_detector
from yolo_orch.testing.yolo import (
    RecordingContext,
    build_task_checkpoint,
    ensure_ultralytics,
    fixed_resolver,
)

SLICED = {"size": 256, "overlap": 0.2, "merge": "nms", "iou": 0.5, "include_full": False}
"""Tiles at imgsz 256: the shapes keep the size the model was trained on."""
IMGSZ = 256


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> ResolvedWeights:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    path = train_shape_detector(tmp_path_factory.mktemp("slicing"))
    return ResolvedWeights(path, sha256_file(path))


def _run(
    weights: ResolvedWeights, image: Path, workdir: Path, max_slices: int = 256, **params: Any
) -> Any:
    runner = YoloInferenceRunner(
        fixed_resolver({"model": weights}),
        data_roots=[image.parent],
        max_slices_per_image=max_slices,
    )
    context = RecordingContext().context(workdir, [image], model="model", **params)
    return runner.run(context).detail["images"][0]


def test_sliced_finds_the_small_shapes_whole_image_inference_misses(
    trained: ResolvedWeights, tmp_path: Path
) -> None:
    image, truth = large_shape_image(tmp_path)  # 2048x1536
    params: dict[str, Any] = {"imgsz": IMGSZ, "max_det": 1000, "conf": 0.1}
    whole = _run(trained, image, tmp_path / "whole", **params)
    sliced = _run(trained, image, tmp_path / "sliced", slice=SLICED, save_annotated=True, **params)

    assert (sliced["width"], sliced["height"]) == (2048, 1536)
    whole_hits, total = recall(whole["detections"], truth)
    sliced_hits, _ = recall(sliced["detections"], truth)
    whole_recall, sliced_recall = whole_hits / total, sliced_hits / total
    # measured: 0.72 sliced, 0.0 whole (the shapes are 2-3 pixels at imgsz)
    assert sliced_recall >= 0.5, (sliced_recall, whole_recall)
    assert whole_recall <= 0.1, (sliced_recall, whole_recall)
    for detection in sliced["detections"]:
        box = detection["box"]
        assert 0 <= box["x1"] < box["x2"] <= sliced["width"]
        assert 0 <= box["y1"] < box["y2"] <= sliced["height"]
    annotated = cv2.imread(str(tmp_path / "sliced" / "artifacts" / sliced["annotated"]))
    assert annotated is not None
    assert annotated.shape[:2] == (1536, 2048)


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


def test_an_image_of_more_slices_than_the_setting_is_an_error_entry(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    path = build_task_checkpoint(tmp_path / "detect.pt", "detect", ("a", "b"))
    weights = ResolvedWeights(path, sha256_file(path))
    image = tmp_path / "wide.png"
    cv2.imwrite(str(image), np.zeros((200, 330, 3), np.uint8))
    slicing = {"size": 96, "overlap": 0.2, "merge": "nms", "iou": 0.5, "include_full": False}

    entry = _run(weights, image, tmp_path / "run", max_slices=14, imgsz=96, slice=slicing)

    assert entry["source"] == "wide.png"
    assert "makes 15 slices" in entry["error"]  # 5 across, 3 down
    assert "detections" not in entry


def test_sliced_jobs_of_one_batch_share_the_passes_and_keep_their_entries(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from dataclasses import replace

    ensure_ultralytics(tmp_path_factory.getbasetemp())
    path = build_task_checkpoint(tmp_path / "detect.pt", "detect", ("a", "b"))
    weights = ResolvedWeights(path, sha256_file(path))
    wide, tall = tmp_path / "wide.png", tmp_path / "tall.png"
    cv2.imwrite(str(wide), np.random.default_rng(0).integers(0, 255, (200, 330, 3), np.uint8))
    cv2.imwrite(str(tall), np.random.default_rng(1).integers(0, 255, (300, 150, 3), np.uint8))
    slicing = {"size": 96, "overlap": 0.2, "merge": "nms", "iou": 0.5, "include_full": False}
    runner = YoloInferenceRunner(fixed_resolver({"model": weights}), data_roots=[tmp_path])

    def context(job_id: str, image: Path) -> Any:
        ctx = RecordingContext().context(
            tmp_path / job_id, [image], model="model", imgsz=96, max_det=5, slice=slicing
        )
        return replace(ctx, job=replace(ctx.job, id=job_id))

    alone = [runner.run(context(name, image)) for name, image in (("w", wide), ("t", tall))]
    together = runner.run_batch([context("a", wide), context("b", tall)])

    assert runner.batches == [BatchRecord(("a", "b"), 2)]
    for one, both in zip(alone, together, strict=True):
        assert isinstance(both, JobResult)
        assert both.detail["images"] == one.detail["images"]
