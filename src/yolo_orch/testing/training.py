"""Helpers for training tests: a tiny synthetic detection dataset and training job contexts.

`make_dataset(root, ...)` writes noise images with filled coloured rectangles, one YOLO label line
per rectangle (`class cx cy w h`, normalised; the class is the colour), and a `data.yaml` with
`path`, `train`, `val` and `names`. 20 images take well under a second.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from yolo_orch.testing.yolo import CLASS_NAMES

_COLOURS = ((0, 0, 255), (0, 255, 0), (255, 0, 0))  # BGR for red, green, blue


def make_dataset(
    root: Path, n_train: int = 16, n_val: int = 4, size: int = 64, seed: int = 0
) -> Path:
    """Write `root/images/{train,val}`, `root/labels/{train,val}` and `root/data.yaml`."""
    import cv2
    import numpy as np
    import yaml

    rng = np.random.default_rng(seed)
    for split, count in (("train", n_train), ("val", n_val)):
        images = root / "images" / split
        labels = root / "labels" / split
        images.mkdir(parents=True, exist_ok=True)
        labels.mkdir(parents=True, exist_ok=True)
        for i in range(count):
            image = rng.integers(0, 60, size=(size, size, 3), dtype=np.uint8)
            lines = []
            for _ in range(int(rng.integers(1, 3))):
                cls = int(rng.integers(0, len(CLASS_NAMES)))
                w, h = (int(v) for v in rng.integers(size // 5, size // 2, size=2))
                x1, y1 = int(rng.integers(0, size - w)), int(rng.integers(0, size - h))
                cv2.rectangle(image, (x1, y1), (x1 + w - 1, y1 + h - 1), _COLOURS[cls], -1)
                cx, cy = (x1 + w / 2) / size, (y1 + h / 2) / size
                lines.append(f"{cls} {cx:.6f} {cy:.6f} {w / size:.6f} {h / size:.6f}")
            if not cv2.imwrite(str(images / f"{split}{i}.png"), image):
                raise RuntimeError(f"could not write an image under {images}")
            (labels / f"{split}{i}.txt").write_text("\n".join(lines) + "\n")
    data = {"path": ".", "train": "images/train", "val": "images/val", "names": list(CLASS_NAMES)}
    yaml_path = root / "data.yaml"
    yaml_path.write_text(yaml.safe_dump(data, sort_keys=False))
    return yaml_path


class TrainingRecorder:
    """Builds training (or validation) `RunContext`s; records progress and cancels on request."""

    def __init__(self, cancel_when: Callable[[Any], bool] | None = None) -> None:
        self.progress: list[Any] = []
        self.cancel_when = cancel_when
        """Called with the last progress; True asks for cancel."""

    def report(self, progress: Any) -> None:
        self.progress.append(progress)

    def should_cancel(self) -> bool:
        return bool(self.cancel_when and self.progress and self.cancel_when(self.progress[-1]))

    def context(
        self,
        workdir: Path,
        dataset: Path,
        model: str = "yolo11n.yaml",
        model_id: str | None = None,
        devices: tuple[str, ...] = ("cpu",),
        job_id: str = "0123456789abcdef",
        kind: str = "training",
        split: str | None = None,
        **params: Any,
    ) -> Any:
        from yolo_orch.domain import Job, JobKind, JobState, spec_of
        from yolo_orch.runners.base import RunContext

        spec: dict[str, Any] = {
            "dataset": dataset.name,
            "dataset_path": str(dataset),
            "params": params,
        }
        if split is not None:
            spec["split"] = split
        job = Job(
            id=job_id,
            seq=1,
            kind=JobKind(kind),
            state=JobState.RUNNING,
            model=model,
            spec=spec_of(JobKind(kind), spec),
            priority=0,
            gpus=len(devices),
            attempt=1,
            max_attempts=3,
            created_at=datetime.now(UTC),
            model_id=model_id,
        )
        return RunContext(
            job=job,
            devices=devices,
            workdir=workdir,
            report_progress=self.report,
            should_cancel=self.should_cancel,
        )
