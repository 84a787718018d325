"""Tiny generated datasets for every ultralytics task, in the layouts ultralytics reads.

Each image is dark noise with a few filled shapes whose colour is their class (red, green, blue):
- `detect`: `yolo_orch.testing.training.make_dataset` (rectangles, `class cx cy w h`).
- `segment`: triangles, `class x1 y1 x2 y2 x3 y3` polygons.
- `pose`: rectangles with three keypoints each (two corners and the centre), `kpt_shape: [3, 3]`.
- `obb`: rotated rectangles, `class x1 y1 ... x4 y4` (4 corners).
- `classify`: one colour per image in `root/{train,val}/<class>/`.
- `semantic`: class-index PNG masks in `masks/<split>/` (255 marks unlabelled pixels), `masks_dir`.
- `depth`: 16-bit PNG depth maps in `depth/<split>/` (millimetres, `depth_scale: 1000`).

`make_task_dataset(task, root)` returns what a job names: the data.yaml, or the folder (classify).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from yolo_orch.testing.training import make_dataset
from yolo_orch.testing.yolo import CLASS_NAMES

TASKS = ("detect", "segment", "pose", "obb", "classify", "semantic", "depth")

_COLOURS = ((0, 0, 255), (0, 255, 0), (255, 0, 0))  # BGR for red, green, blue
Draw = Callable[[Any, Any, int], list[str]]
"""Draws shapes on an image (`image`, `rng`, `size`) and returns its YOLO label lines."""


def make_task_dataset(
    task: str, root: Path, n_train: int = 16, n_val: int = 4, size: int = 64
) -> Path:
    """Write a dataset for `task` under `root`; return the data.yaml (the folder for classify)."""
    if task == "detect":
        return make_dataset(root, n_train=n_train, n_val=n_val, size=size)
    if task == "classify":
        return _classify(root, n_train, n_val, size)
    extra: dict[str, Any] = {}
    if task == "pose":
        extra = {"kpt_shape": [3, 3], "flip_idx": [1, 0, 2]}
    elif task == "semantic":
        extra = {"masks_dir": "masks"}
    elif task == "depth":
        extra = {"depth_scale": 1000}
    draw = {"segment": _triangles, "pose": _keypointed, "obb": _rotated}.get(task, _triangles)
    return _yolo_layout(root, task, draw, extra, n_train, n_val, size)


def _yolo_layout(
    root: Path,
    task: str,
    draw: Draw,
    extra: dict[str, Any],
    n_train: int,
    n_val: int,
    size: int,
) -> Path:
    import cv2
    import numpy as np
    import yaml

    rng = np.random.default_rng(0)
    for split, count in (("train", n_train), ("val", n_val)):
        folders = {name: root / name / split for name in ("images", "labels", "masks", "depth")}
        for name in ("images", {"semantic": "masks", "depth": "depth"}.get(task, "labels")):
            folders[name].mkdir(parents=True, exist_ok=True)
        for i in range(count):
            image = rng.integers(0, 60, size=(size, size, 3), dtype=np.uint8)
            lines = draw(image, rng, size)
            stem = f"{split}{i}"
            if not cv2.imwrite(str(folders["images"] / f"{stem}.png"), image):
                raise RuntimeError(f"could not write an image under {folders['images']}")
            if task == "semantic":
                cv2.imwrite(str(folders["masks"] / f"{stem}.png"), _class_mask(image))
            elif task == "depth":
                # Brighter pixels are nearer: 1-5 m, in millimetres.
                depth = 5000 - image.sum(axis=2).astype(np.uint16) * 4000 // 765
                cv2.imwrite(str(folders["depth"] / f"{stem}.png"), depth.astype(np.uint16))
            else:
                (folders["labels"] / f"{stem}.txt").write_text("\n".join(lines) + "\n")
    names = ["depth"] if task == "depth" else list(CLASS_NAMES)
    data = {"path": ".", "train": "images/train", "val": "images/val", "names": names, **extra}
    yaml_path = root / "data.yaml"
    yaml_path.write_text(yaml.safe_dump(data, sort_keys=False))
    return yaml_path


def _class_mask(image: Any) -> Any:
    """Class index where one colour dominates; 255 (ignored) on the noise."""
    import numpy as np

    mask = np.full(image.shape[:2], 255, dtype=np.uint8)
    for cls, colour in enumerate(_COLOURS):
        mask[(image == colour).all(axis=2)] = cls
    return mask


def _triangles(image: Any, rng: Any, size: int) -> list[str]:
    import cv2
    import numpy as np

    lines = []
    for _ in range(int(rng.integers(1, 3))):
        cls = int(rng.integers(0, len(CLASS_NAMES)))
        x, y = (int(v) for v in rng.integers(0, size // 2, size=2))
        s = int(rng.integers(size // 4, size // 2))
        points = np.array([[x, y + s], [x + s, y + s], [x + s // 2, y]], dtype=np.int32)
        cv2.fillPoly(image, [points], _COLOURS[cls])
        coords = " ".join(f"{v / size:.6f}" for v in points.reshape(-1))
        lines.append(f"{cls} {coords}")
    return lines


def _keypointed(image: Any, rng: Any, size: int) -> list[str]:
    import cv2

    lines = []
    for _ in range(int(rng.integers(1, 3))):
        cls = int(rng.integers(0, len(CLASS_NAMES)))
        w, h = (int(v) for v in rng.integers(size // 5, size // 2, size=2))
        x1, y1 = int(rng.integers(0, size - w)), int(rng.integers(0, size - h))
        cv2.rectangle(image, (x1, y1), (x1 + w - 1, y1 + h - 1), _COLOURS[cls], -1)
        points = ((x1, y1), (x1 + w, y1 + h), (x1 + w / 2, y1 + h / 2))
        keypoints = " ".join(f"{px / size:.6f} {py / size:.6f} 2" for px, py in points)
        cx, cy = (x1 + w / 2) / size, (y1 + h / 2) / size
        lines.append(f"{cls} {cx:.6f} {cy:.6f} {w / size:.6f} {h / size:.6f} {keypoints}")
    return lines


def _rotated(image: Any, rng: Any, size: int) -> list[str]:
    import cv2
    import numpy as np

    lines = []
    for _ in range(int(rng.integers(1, 3))):
        cls = int(rng.integers(0, len(CLASS_NAMES)))
        w, h = (float(v) for v in rng.integers(size // 5, size // 3, size=2))
        c = (
            float(rng.integers(size // 3, 2 * size // 3)),
            float(rng.integers(size // 3, 2 * size // 3)),
        )
        corners = cv2.boxPoints((c, (w, h), float(rng.integers(0, 90))))
        cv2.fillPoly(image, [corners.astype(np.int32)], _COLOURS[cls])
        coords = " ".join(f"{min(max(v / size, 0.0), 1.0):.6f}" for v in corners.reshape(-1))
        lines.append(f"{cls} {coords}")
    return lines


def _classify(root: Path, n_train: int, n_val: int, size: int) -> Path:
    import cv2
    import numpy as np

    rng = np.random.default_rng(0)
    for split, count in (("train", n_train), ("val", n_val)):
        for i in range(count):
            cls = i % len(CLASS_NAMES)
            folder = root / split / CLASS_NAMES[cls]
            folder.mkdir(parents=True, exist_ok=True)
            image = rng.integers(0, 60, size=(size, size, 3), dtype=np.uint8)
            s = int(rng.integers(size // 2, size))
            cv2.rectangle(image, (0, 0), (s - 1, s - 1), _COLOURS[cls], -1)
            if not cv2.imwrite(str(folder / f"{split}{i}.png"), image):
                raise RuntimeError(f"could not write an image under {folder}")
    return root
