"""Sliced inference's own parts: the tiles of an image, the bound on them, merging detections of
overlapping tiles (NMS, NMM), and shifting each tile's detections to the full image, with a
model that finds white squares by their pixels. (Integration tier: merging and the results are
ultralytics', which must be configured before its first import.)"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, ClassVar

import numpy as np
import pytest
import torch

from yolo_orch.errors import ErrorCode, InvalidJob
from yolo_orch.params.inference import InferenceParams, check_task
from yolo_orch.params.slicing import SliceParams
from yolo_orch.runners.slicing import merge_rows, sliced_predictions, tile_boxes, too_many_slices
from yolo_orch.testing.yolo import ensure_ultralytics


@pytest.fixture(autouse=True, scope="module")
def _offline_ultralytics(tmp_path_factory: pytest.TempPathFactory) -> None:
    ensure_ultralytics(tmp_path_factory.getbasetemp())


@pytest.mark.parametrize(
    ("width", "height", "size", "overlap"),
    [(2000, 1500, 640, 0.2), (640, 640, 640, 0.2), (641, 300, 640, 0.1), (1000, 700, 256, 0.5)],
)
def test_tiles_cover_the_image_inside_it(
    width: int, height: int, size: int, overlap: float
) -> None:
    slicing = SliceParams(size=size, overlap=overlap)
    tiles = tile_boxes(width, height, slicing)
    assert len(tiles) == slicing.count(width, height)
    covered = np.zeros((height, width), dtype=bool)
    for x1, y1, x2, y2 in tiles:
        assert 0 <= x1 < x2 <= width
        assert 0 <= y1 < y2 <= height
        assert x2 - x1 == min(size, width)
        assert y2 - y1 == min(size, height)
        covered[y1:y2, x1:x2] = True
    assert covered.all()


def test_a_small_image_is_one_tile_and_include_full_adds_the_whole_image_once() -> None:
    assert tile_boxes(300, 200, SliceParams(size=640, include_full=True)) == [(0, 0, 300, 200)]
    tiles = tile_boxes(1000, 500, SliceParams(size=400, include_full=True))
    assert tiles[-1] == (0, 0, 1000, 500)
    assert tiles.count((0, 0, 1000, 500)) == 1
    assert len(tiles) == SliceParams(size=400, include_full=True).count(1000, 500)


def test_an_image_of_too_many_slices_is_refused() -> None:
    slicing = SliceParams(size=64, overlap=0.5)
    assert too_many_slices(np.zeros((64, 64, 3), np.uint8), slicing, 1) is None
    assert too_many_slices(np.zeros((96, 96, 3), np.uint8), slicing, 4) is None  # 2 x 2
    refusal = too_many_slices(np.zeros((96, 96, 3), np.uint8), slicing, 3)
    assert refusal is not None
    assert "makes 4 slices" in refusal
    assert "more than 3 (max_slices_per_image)" in refusal


def test_slice_applies_to_detect_segment_obb_only_and_obb_merges_by_nms() -> None:
    sliced = InferenceParams(slice=SliceParams()).model_dump(exclude_none=True)
    for task in ("detect", "segment", "obb"):
        check_task(sliced, task)
    for task in ("pose", "classify", "semantic", "depth"):
        with pytest.raises(InvalidJob) as refused:
            check_task(sliced, task)
        assert refused.value.code is ErrorCode.TASK_MISMATCH
    merging = InferenceParams(slice=SliceParams(merge="nmm")).model_dump(exclude_none=True)
    check_task(merging, "detect")
    with pytest.raises(InvalidJob, match="nmm"):
        check_task(merging, "obb")


ROWS = [  # x1 y1 x2 y2 conf cls
    [10, 10, 50, 50, 0.9, 0],
    [12, 10, 60, 50, 0.8, 0],  # the same object as the first, cut differently by its tile
    [12, 10, 60, 50, 0.7, 1],  # another class: never merged with class 0
    [200, 200, 220, 220, 0.6, 0],
]


def test_nms_keeps_the_most_confident_of_each_class() -> None:
    groups = merge_rows(torch.tensor(ROWS), SliceParams(merge="nms", iou=0.5))
    assert groups == [(0, [0]), (2, [2]), (3, [3])]


def test_nmm_merges_the_matches_into_the_most_confident() -> None:
    groups = merge_rows(torch.tensor(ROWS), SliceParams(merge="nmm", iou=0.5))
    assert groups == [(0, [0, 1]), (2, [2]), (3, [3])]


class _SquareFinder:
    """A model that finds each white square of an image by its pixels: one box per connected
    run of white rows and columns (the squares here never share rows or columns)."""

    names: ClassVar[dict[int, str]] = {0: "square"}

    def __init__(self) -> None:
        self.batches: list[int] = []

    def predict(self, source: list[Any], stream: bool, **_: Any) -> Generator[Any, None, None]:
        from ultralytics.engine.results import Results

        self.batches.append(len(source))
        for crop in source:
            white = (crop == 255).all(axis=2)
            boxes = [[*box, 0.9, 0] for box in _white_boxes(white)]
            yield Results(crop, path="", names=self.names, boxes=torch.tensor(boxes).reshape(-1, 6))


def _white_boxes(white: Any) -> list[list[float]]:
    def runs(line: Any) -> list[tuple[int, int]]:
        found, start = [], None
        for i, on in enumerate([*line, False]):
            if on and start is None:
                start = i
            elif not on and start is not None:
                found.append((start, i))
                start = None
        return found

    boxes = []
    for x1, x2 in runs(white.any(axis=0)):
        for y1, y2 in runs(white[:, x1:x2].any(axis=1)):
            boxes.append([float(x1), float(y1), float(x2), float(y2)])
    return boxes


@pytest.mark.parametrize("merge", ["nms", "nmm"])
def test_detections_come_back_in_full_image_coordinates_merged(merge: str) -> None:
    image = np.zeros((300, 500, 3), np.uint8)
    squares = [(20, 30, 40, 50), (300, 200, 330, 230), (180, 100, 220, 140)]
    for x1, y1, x2, y2 in squares:
        image[y1:y2, x1:x2] = 255
    params = InferenceParams(imgsz=128, slice=SliceParams(size=128, overlap=0.25, merge=merge))
    model = _SquareFinder()
    found = list(sliced_predictions(model, "cpu", params, [(7, image)], lambda: False))  # type: ignore[arg-type]
    [(index, pixels, result)] = found
    assert index == 7
    assert pixels is image
    assert result.orig_shape == (300, 500)
    assert result.boxes is not None
    boxes = sorted(tuple(round(v) for v in box) for box in result.boxes.xyxy.tolist())
    # A square whole in one tile comes back where it is, once; one cut by tiles comes back at
    # its place (nmm: joined whole) or as its most confident part (nms: inside it).
    assert len(boxes) == len(squares)
    for (x1, y1, x2, y2), truth in zip(boxes, sorted(squares), strict=True):
        tx1, ty1, tx2, ty2 = truth
        assert tx1 <= x1 < x2 <= tx2
        assert ty1 <= y1 < y2 <= ty2
        if merge == "nmm":
            assert (x1, y1, x2, y2) == truth
    tiles = len(tile_boxes(500, 300, params.slice))  # type: ignore[arg-type]
    assert sum(model.batches) == tiles
    assert len(model.batches) < tiles
