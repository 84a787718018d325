"""Each task's result per image, encoded from ultralytics' own `Results` (boxes, masks, keypoints,
probs, obb, semantic_mask, depth), with coordinates in the original image's pixels.

One function per task adds its fields to the image's entry; semantic and depth maps are written as
artifacts next to the annotated images, and the entry names them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from yolo_orch.domain import JsonObject
from yolo_orch.params.inference import (
    DEFAULT_DEPTH_FORMAT,
    DEFAULT_MASK_FORMAT,
    DEFAULT_TOP_K,
    InferenceParams,
)
from yolo_orch.runners.artifact_names import artifact_name

if TYPE_CHECKING:
    import torch
    from numpy.typing import NDArray
    from ultralytics.engine.results import Masks, Results

__all__ = ["Encoding", "ImageOutput", "counted", "encode", "save_annotated"]

MM_PER_M = 1000


@dataclass(frozen=True)
class Encoding:
    """How a job encodes its results: its model's task and the task's params."""

    task: str
    mask_format: str
    top_k: int
    depth_format: str
    keypoint_names: dict[int, list[str]]
    """Per class id, where the model's metadata names its keypoints (`kpt_names`)."""

    @classmethod
    def of(cls, task: str, params: InferenceParams, model: object) -> Encoding:
        names = getattr(model, "kpt_names", None)
        return cls(
            task=task,
            mask_format=params.mask_format or DEFAULT_MASK_FORMAT,
            top_k=params.top_k or DEFAULT_TOP_K,
            depth_format=params.depth_format or DEFAULT_DEPTH_FORMAT,
            keypoint_names=(
                {
                    k: [str(n) for n in v]
                    for k, v in names.items()
                    if isinstance(k, int) and isinstance(v, list | tuple)
                }
                if isinstance(names, dict)
                else {}
            ),
        )


@dataclass(frozen=True)
class ImageOutput:
    """Where an image's artifacts go: `artifacts/{index:05d}_{stem}{tail}...`, a long stem cut
    to fit in a file name (`artifact_names`)."""

    artifacts: Path
    index: int
    stem: str
    tail: str = ""
    """Kept whole after the stem: a video frame's `_f{frame:06d}`."""

    def write(self, suffix: str, data: bytes) -> str:
        """Write an artifact (renamed into place whole) and return its name."""
        name = artifact_name(self.index, self.stem, self.tail + suffix)
        self.artifacts.mkdir(parents=True, exist_ok=True)
        tmp = self.artifacts / f".{name}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, self.artifacts / name)
        return name


def encode(result: Results, encoding: Encoding, output: ImageOutput) -> JsonObject:
    """The task's fields of one image's entry (after `source`, `width` and `height`)."""
    return _ENCODERS[encoding.task](result, encoding, output)


def counted(task: str, images: list[JsonObject]) -> JsonObject:
    """What the result summary counts for the task: detections, classified images, or maps."""
    if task == "classify":
        return {"classified": sum(1 for image in images if "classes" in image)}
    if task in ("semantic", "depth"):
        return {"maps": sum(1 for image in images if "map" in image)}
    return {"detections": sum(len(image.get("detections", ())) for image in images)}


def save_annotated(result: Results, output: ImageOutput) -> str:
    """The image with what the task found drawn on it (ultralytics' `Results.plot`)."""
    return output.write(".jpg", _encode_image(".jpg", result.plot()))


def _detect(result: Results, encoding: Encoding, output: ImageOutput) -> JsonObject:
    return {"detections": _detections(result)}


def _detections(result: Results) -> list[JsonObject]:
    import numpy as np

    boxes = result.boxes
    if boxes is None or len(boxes) == 0:
        return []
    names: dict[int, str] = result.names
    # `Boxes.data` is x1 y1 x2 y2 [track id] conf cls: rounded a column at a time and converted
    # to Python lists once, which with up to max_det boxes is 4x faster than a round() per value.
    data = _numpy(boxes.data).astype(np.float64)
    corners = np.round(data[:, :4], 3).tolist()
    confidences = np.round(data[:, -2], 5).tolist()
    class_ids = data[:, -1].astype(np.int64).tolist()
    track_ids = data[:, 4].astype(np.int64).tolist() if boxes.is_track else None
    detections: list[JsonObject] = []
    for i, ((x1, y1, x2, y2), confidence, class_id) in enumerate(
        zip(corners, confidences, class_ids, strict=True)
    ):
        detection: JsonObject = {
            "class_id": class_id,
            "class_name": names.get(class_id, str(class_id)),
            "confidence": confidence,
            "box": {"x1": x1, "y1": y1, "x2": x2, "y2": y2},
        }
        if track_ids is not None:
            detection["track_id"] = track_ids[i]
        detections.append(detection)
    return detections


def _segment(result: Results, encoding: Encoding, output: ImageOutput) -> JsonObject:
    detections = _detections(result)
    masks = result.masks
    if masks is None or encoding.mask_format == "none" or not detections:
        return {"detections": detections}
    encode_masks = _rle if encoding.mask_format == "rle" else _polygons
    shapes = encode_masks(masks, result.orig_shape)
    for detection, mask in zip(detections, shapes, strict=True):
        detection["mask"] = mask
    return {"detections": detections}


def _polygons(masks: Masks, orig_shape: tuple[int, int]) -> list[JsonObject]:
    """Each mask's outer contours, one ring of [x, y] per separate part. `Masks.xy` finds the same
    contours but joins the parts into one ring with bridging edges; here each part stays a ring,
    scaled to the image the same way."""
    import cv2
    import numpy as np
    from ultralytics.utils import ops

    data = _numpy(masks.data).astype(np.uint8)
    polygons: list[JsonObject] = []
    for mask in data:
        contours = cv2.findContours(mask, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)[0]
        rings = [
            ops.scale_coords(data.shape[1:], c.reshape(-1, 2).astype("float32"), orig_shape)
            .round(2)
            .tolist()
            for c in contours
        ]
        polygons.append({"polygons": rings})
    return polygons


def _rle(masks: Masks, orig_shape: tuple[int, int]) -> list[JsonObject]:
    """Each mask at the image's size, COCO run-length encoded (pycocotools)."""
    import numpy as np
    import torch
    from pycocotools import mask as coco_mask
    from ultralytics.utils import ops

    shapes: list[JsonObject] = []
    for mask in torch.as_tensor(masks.data):  # one at a time: N masks at full size can be large
        full = ops.scale_masks(mask[None, None].float(), orig_shape)[0, 0] > 0.5
        rle = coco_mask.encode(np.asfortranarray(_numpy(full).astype(np.uint8)))
        shapes.append({"rle": {"size": list(rle["size"]), "counts": rle["counts"].decode()}})
    return shapes


def _pose(result: Results, encoding: Encoding, output: ImageOutput) -> JsonObject:
    detections = _detections(result)
    keypoints = result.keypoints
    if keypoints is None or not detections:
        return {"detections": detections}
    xy = _numpy(keypoints.xy).tolist()
    conf = _numpy(keypoints.conf).tolist() if keypoints.conf is not None else None
    for i, detection in enumerate(detections):
        points = [
            [round(x, 3), round(y, 3), round(conf[i][k], 5) if conf is not None else None]
            for k, (x, y) in enumerate(xy[i])
        ]
        detection["keypoints"] = points
        names = encoding.keypoint_names.get(detection["class_id"])
        if names is not None and len(names) == len(points):
            detection["keypoint_names"] = names
    return {"detections": detections}


def _obb(result: Results, encoding: Encoding, output: ImageOutput) -> JsonObject:
    obb = result.obb
    if obb is None or len(obb) == 0:
        return {"detections": []}
    names: dict[int, str] = result.names
    corners = _numpy(obb.xyxyxyxy).tolist()
    tracked = bool(obb.is_track)
    detections: list[JsonObject] = []
    for row, points in zip(obb.data.tolist(), corners, strict=True):
        cx, cy, w, h, rotation = row[:5]
        conf, cls = row[-2], row[-1]
        class_id = int(cls)
        detection: JsonObject = {
            "class_id": class_id,
            "class_name": names.get(class_id, str(class_id)),
            "confidence": round(conf, 5),
            "obb": {
                "cx": round(cx, 3),
                "cy": round(cy, 3),
                "w": round(w, 3),
                "h": round(h, 3),
                "rotation": round(rotation, 5),
                "points": [[round(x, 3), round(y, 3)] for x, y in points],
            },
        }
        if tracked:
            detection["track_id"] = int(row[5])
        detections.append(detection)
    return {"detections": detections}


def _classify(result: Results, encoding: Encoding, output: ImageOutput) -> JsonObject:
    import torch

    probs = result.probs
    if probs is None:
        return {"classes": []}
    data = torch.as_tensor(probs.data)
    top = torch.topk(data, min(encoding.top_k, data.numel()))
    names: dict[int, str] = result.names
    return {
        "classes": [
            {
                "class_id": int(class_id),
                "class_name": names.get(int(class_id), str(class_id)),
                "confidence": round(float(conf), 5),
            }
            for conf, class_id in zip(top.values.tolist(), top.indices.tolist(), strict=True)
        ]
    }


def _semantic(result: Results, encoding: Encoding, output: ImageOutput) -> JsonObject:
    """Per-class pixel ratio (`Results.summary`), and the class-index map as a PNG (8-bit up to
    256 classes, else 16-bit)."""
    import numpy as np

    if result.semantic_mask is None:
        return {"classes": []}
    classes = [
        {"class_id": row["class"], "class_name": row["name"], "pixel_ratio": row["pixel_ratio"]}
        for row in result.summary()
    ]
    array = _numpy(result.semantic_mask.data)
    dtype = np.uint8 if len(result.names) <= 256 else np.uint16
    name = output.write("_classes.png", _encode_image(".png", array.astype(dtype)))
    return {"classes": classes, "map": name}


def _depth(result: Results, encoding: Encoding, output: ImageOutput) -> JsonObject:
    """Min, mean and max depth (metres) over the finite pixels, and the map as float32 metres
    (`.npy`) or a 16-bit PNG of millimetres."""
    import io

    import numpy as np

    if result.depth is None:
        return {"depth": None}
    depth = _numpy(result.depth.data).astype(np.float32)
    finite = depth[np.isfinite(depth)]
    stats = (
        {
            "min": round(float(finite.min()), 4),
            "mean": round(float(finite.mean()), 4),
            "max": round(float(finite.max()), 4),
        }
        if finite.size
        else None
    )
    if encoding.depth_format == "png16":
        mm = np.clip(np.nan_to_num(depth, nan=0.0) * MM_PER_M, 0, np.iinfo(np.uint16).max)
        name = output.write("_depth.png", _encode_image(".png", mm.round().astype(np.uint16)))
    else:
        buffer = io.BytesIO()
        np.save(buffer, depth)
        name = output.write("_depth.npy", buffer.getvalue())
    return {"depth": stats, "map": name}


def _numpy(data: torch.Tensor | NDArray[Any]) -> NDArray[Any]:
    import numpy as np
    import torch

    return data.cpu().numpy() if isinstance(data, torch.Tensor) else np.asarray(data)


def _encode_image(suffix: str, image: NDArray[Any]) -> bytes:
    import cv2

    ok, encoded = cv2.imencode(suffix, image)
    if not ok:
        raise RuntimeError(f"could not encode an image as {suffix}")
    return bytes(encoded.tobytes())


_ENCODERS: dict[str, Callable[[Results, Encoding, ImageOutput], JsonObject]] = {
    "detect": _detect,
    "segment": _segment,
    "pose": _pose,
    "obb": _obb,
    "classify": _classify,
    "semantic": _semantic,
    "depth": _depth,
}
