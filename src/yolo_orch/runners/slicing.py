"""Sliced inference (`params.slice`, docs/slicing.md): each image cut into overlapping tiles
(sahi's `get_slice_bboxes`), the tiles of a chunk of images put through the lane's forward passes
in batches (`predict_batch`), each tile's detections shifted back to the full image and merged
per class: NMS (ultralytics' `fast_nms`; rotated boxes by its probabilistic IoU) or
greedy non-maximum merging (sahi's `batched_greedy_nmm`). What comes out is an ultralytics
`Results` of the full image, so its entry and annotated image are made as whole-image ones are.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from yolo_orch.params.inference import InferenceParams
from yolo_orch.params.slicing import SliceParams
from yolo_orch.runners.decode import batch_size
from yolo_orch.runners.predict import predict_batch

if TYPE_CHECKING:
    import numpy as np
    import torch
    from numpy.typing import NDArray
    from ultralytics.engine.results import Results
    from ultralytics.models import YOLO

    Pixels = NDArray[np.uint8]

Box = tuple[int, int, int, int]
"""x1, y1, x2, y2 of a tile in the full image."""

CLASS_OFFSET = 7680.0
"""Moves each class's boxes apart so one NMS over all of them never matches across classes
(ultralytics' `max_wh`)."""


def tile_boxes(width: int, height: int, slicing: SliceParams) -> list[Box]:
    """The tiles of an image (sahi's; the last one of a row or column moved back inside the
    image), then the whole image with `include_full`."""
    from sahi.slicing import get_slice_bboxes

    boxes = get_slice_bboxes(
        height,
        width,
        slice_height=slicing.size,
        slice_width=slicing.size,
        overlap_height_ratio=slicing.overlap,
        overlap_width_ratio=slicing.overlap,
    )
    tiles = [(max(0, x1), max(0, y1), min(width, x2), min(height, y2)) for x1, y1, x2, y2 in boxes]
    if slicing.include_full and tiles != [(0, 0, width, height)]:
        tiles.append((0, 0, width, height))
    return list(dict.fromkeys(tiles))


def too_many_slices(image: Pixels, slicing: SliceParams, limit: int) -> str | None:
    """Why an image is not sliced: more tiles than `limit` (`max_slices_per_image`)."""
    height, width = image.shape[:2]
    count = slicing.count(width, height)
    if count <= limit:
        return None
    return (
        f"a {width}x{height} image makes {count} slices of {slicing.size} pixels, more than "
        f"{limit} (max_slices_per_image): use a larger params.slice.size or less overlap"
    )


@dataclass
class _Found:
    """One image's detections from its tiles so far, in full-image coordinates."""

    image: Pixels
    tiles_left: int
    rows: list[torch.Tensor] = field(default_factory=list)
    """Per tile: x1 y1 x2 y2 conf cls (boxes), or x y w h r conf cls (obb)."""
    masks: list[tuple[Box, torch.Tensor]] = field(default_factory=list)
    """Per tile: where it is and its masks, one per row, as the model gave them (letterboxed at
    imgsz): only the kept ones are scaled, to the tile, at merging."""


def sliced_predictions(
    model: YOLO,
    device: str,
    params: InferenceParams,
    images: Sequence[tuple[int, Pixels]],
    stopped: Callable[[], bool],
) -> Generator[tuple[int, Pixels, Results], None, None]:
    """Each image's merged `Results`, in order, as soon as its last tile has run. The tiles of
    all `images` share forward passes of `batch_size(imgsz)` tiles; `stopped` is asked before
    each pass."""
    slicing = params.slice
    if slicing is None:
        raise ValueError("sliced_predictions needs params.slice")
    tiles = [
        (n, box)
        for n, (_, image) in enumerate(images)
        for box in tile_boxes(image.shape[1], image.shape[0], slicing)
    ]
    found = [
        _Found(image, sum(1 for m, _ in tiles if m == n)) for n, (_, image) in enumerate(images)
    ]
    size, ready = batch_size(params.imgsz), 0
    for start in range(0, len(tiles), size):
        if stopped():
            return
        batch = tiles[start : start + size]
        crops = [(k, _crop(images[n][1], box)) for k, (n, box) in enumerate(batch)]
        with closing(predict_batch(model, crops, device, params)) as predictions:
            for (k, _), result in predictions:
                n, box = batch[k]
                _collect(found[n], box, result)
        while ready < len(images) and found[ready].tiles_left == 0:
            index, image = images[ready]
            yield index, image, merged(found[ready], params, model.names)
            found[ready] = _Found(image, 0)  # its tiles' detections are no longer needed
            ready += 1


def _crop(image: Pixels, box: Box) -> Pixels:
    import numpy as np

    x1, y1, x2, y2 = box
    return np.ascontiguousarray(image[y1:y2, x1:x2])


def _collect(found: _Found, box: Box, result: Results) -> None:
    """A tile's detections, moved by the tile's corner."""
    import torch

    found.tiles_left -= 1
    x1, y1 = float(box[0]), float(box[1])
    if result.obb is not None:
        rows = torch.as_tensor(result.obb.data).detach().cpu().clone().float()
        rows[:, 0] += x1
        rows[:, 1] += y1
    elif result.boxes is not None:
        rows = torch.as_tensor(result.boxes.data).detach().cpu().clone().float()
        rows[:, [0, 2]] += x1
        rows[:, [1, 3]] += y1
    else:
        return
    found.rows.append(rows)
    if result.masks is not None:
        found.masks.append((box, torch.as_tensor(result.masks.data).detach().cpu() > 0.5))


def merged(found: _Found, params: InferenceParams, names: dict[int, str]) -> Results:
    """The image's `Results`: its tiles' detections merged per class, best first, at most
    `max_det`; masks at the image's size."""
    import torch
    from ultralytics.engine.results import Results

    assert params.slice is not None
    height, width = found.image.shape[:2]
    rotated = bool(found.rows) and found.rows[0].shape[1] == 7
    rows = torch.cat(found.rows) if found.rows else torch.zeros((0, 6))
    groups = merge_rows(rows, params.slice, rotated=rotated)[: params.max_det]
    kept = rows[[keep for keep, _ in groups]] if groups else rows[:0]
    if params.slice.merge == "nmm" and not rotated:
        for i, (_, members) in enumerate(groups):
            kept[i, 0] = rows[members, 0].min()
            kept[i, 1] = rows[members, 1].min()
            kept[i, 2] = rows[members, 2].max()
            kept[i, 3] = rows[members, 3].max()
    if rotated:
        return Results(found.image, path="", names=names, obb=kept)
    masks = _full_masks(found, groups, height, width) if found.masks else None
    return Results(found.image, path="", names=names, boxes=kept, masks=masks)


def merge_rows(
    rows: torch.Tensor, slicing: SliceParams, *, rotated: bool = False
) -> list[tuple[int, list[int]]]:
    """Each detection kept, best first, with the detections merged into it (itself included)."""
    import torch
    from ultralytics.utils.metrics import batch_probiou
    from ultralytics.utils.nms import TorchNMS

    if len(rows) == 0:
        return []
    scores, classes = rows[:, -2], rows[:, -1]
    if rotated:
        moved = torch.cat((rows[:, :2] + classes[:, None] * CLASS_OFFSET, rows[:, 2:5]), dim=1)
        keep = TorchNMS.fast_nms(moved, scores, slicing.iou, iou_func=batch_probiou)
        return [(int(i), [int(i)]) for i in keep]
    if slicing.merge == "nms":
        keep = TorchNMS.fast_nms(rows[:, :4] + classes[:, None] * CLASS_OFFSET, scores, slicing.iou)
        return [(int(i), [int(i)]) for i in keep]
    from sahi.postprocess.combine import batched_greedy_nmm

    matches: dict[int, list[int]] = batched_greedy_nmm(
        rows.numpy(), match_metric="IOU", match_threshold=slicing.iou
    )
    best_first = sorted(matches, key=lambda i: -float(scores[i]))
    return [(int(i), sorted({int(i), *(int(m) for m in matches[i])})) for i in best_first]


def _full_masks(
    found: _Found, groups: list[tuple[int, list[int]]], height: int, width: int
) -> torch.Tensor:
    """Each kept detection's mask at the image's size: the union of its members' masks, each
    scaled to its tile (ultralytics' `scale_masks`: the letterbox's padding cut off)."""
    import torch
    from ultralytics.utils import ops

    where: list[tuple[Box, torch.Tensor]] = []  # per row: its tile and its mask there
    for box, tile_masks in found.masks:
        where.extend((box, mask) for mask in tile_masks)
    full = torch.zeros((len(groups), height, width), dtype=torch.bool)
    for i, (_, members) in enumerate(groups):
        for member in members:
            (x1, y1, x2, y2), mask = where[member]
            at_tile = ops.scale_masks(mask[None, None].float(), (y2 - y1, x2 - x1))[0, 0] > 0.5
            full[i, y1:y2, x1:x2] |= at_tile
    return full
