"""Tiny real models and images, for tests and benchmarks that run ultralytics on the CPU, offline
and in seconds.

- `ensure_ultralytics(base)`: `configure_ultralytics` once per process (the first folder stays),
  in a folder under `base` the first time; later calls return that folder.
- `build_checkpoint(path)`: a real ultralytics checkpoint of an untrained yolo11n, built from the
  shipped `yolo11n.yaml` and written with `Model.save` (0.2 s; no training, no download). Its class
  head is biased so that every image yields class-0 detections, which makes results predictable.
- `build_task_checkpoint(path, task)`: the same for any task, from its shipped config
  (`TASK_CONFIGS`), seeded; class heads biased the same way; pose models name their keypoints.
- `make_images(folder, n)`: small JPEGs of noise with coloured rectangles; `write_corrupt(path)`.
- `RecordingContext`: builds `RunContext`s whose progress calls are recorded.
- `fixed_resolver(weights)`: a `resolve_weights` over a dict.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

CLASS_NAMES = ("red", "green", "blue")


def ensure_ultralytics(base: Path) -> Path:
    """Configure ultralytics for this process (first call wins) and return its config folder."""
    from yolo_orch.runners.yolo_env import configure_ultralytics

    return configure_ultralytics(base / "ultralytics-config")


def build_checkpoint(path: Path, class_names: tuple[str, ...] = CLASS_NAMES) -> Path:
    """Write an untrained yolo11n detection checkpoint with `class_names` to `path`."""
    import torch
    from ultralytics.models import YOLO
    from ultralytics.nn.tasks import DetectionModel

    net: Any = DetectionModel("yolo11n.yaml", nc=len(class_names), verbose=False)  # type: ignore[no-untyped-call]
    net.names = dict(enumerate(class_names))
    net.task = "detect"
    head = net.model[-1]
    with torch.no_grad():
        for branch in head.cv3:  # class logits per stride: class 0 everywhere, nothing else
            bias = branch[-1].bias
            bias.fill_(-10.0)
            bias[0] = 4.0
    model = YOLO("yolo11n.yaml", task="detect")
    model.model = net
    path.parent.mkdir(parents=True, exist_ok=True)
    model.save(path)
    return path


TASK_CONFIGS = {
    "detect": "yolo11n.yaml",
    "segment": "yolo11n-seg.yaml",
    "pose": "yolo11n-pose.yaml",
    "obb": "yolo11n-obb.yaml",
    "classify": "yolo11n-cls.yaml",
    "semantic": "yolo26n-sem.yaml",
    "depth": "yolo26n-depth.yaml",
}
"""A shipped architecture per task (`ultralytics/cfg/models`)."""

KEYPOINT_NAMES = tuple(f"point{i}" for i in range(17))
"""What `build_task_checkpoint` names a pose model's keypoints (its `kpt_names` metadata)."""


def build_task_checkpoint(
    path: Path,
    task: str,
    class_names: tuple[str, ...] = CLASS_NAMES,
    seed: int = 0,
    *,
    lively: bool = False,
) -> Path:
    """Write an untrained checkpoint of `task` (`TASK_CONFIGS`; `rtdetr` builds an RT-DETR), its
    weights drawn from `seed`, whose class heads favour class 0 so that every image yields class-0
    results (and a segment model's masks fill their boxes).

    `lively`: convolutions drawn with a variance-keeping init (Kaiming, fan-in). torch's default
    init shrinks activations layer by layer until the head sees almost nothing: every seed then
    gives the same raw outputs (within 3e-5 px), and so the variant check could not tell two
    such models apart; lively ones differ (by 0.5 and more, relative)."""
    import torch
    from ultralytics.models import YOLO
    from ultralytics.nn import tasks

    models: dict[str, Any] = {
        "detect": tasks.DetectionModel,
        "segment": tasks.SegmentationModel,
        "pose": tasks.PoseModel,
        "obb": tasks.OBBModel,
        "classify": tasks.ClassificationModel,
        "semantic": tasks.SemanticSegmentationModel,
        "depth": tasks.DepthModel,
        "rtdetr": tasks.RTDETRDetectionModel,
    }
    config = "rtdetr-l.yaml" if task == "rtdetr" else TASK_CONFIGS[task]
    with torch.random.fork_rng():  # the same weights every run, the process's RNG untouched
        torch.manual_seed(seed)
        net: Any = models[task](config, nc=len(class_names), verbose=False)
        for module in net.modules() if lively else ():
            if isinstance(module, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(module.weight, nonlinearity="relu")
    net.names = dict(enumerate(class_names))
    net.task = "detect" if task == "rtdetr" else task
    head = net.model[-1]
    with torch.no_grad():
        if task in ("detect", "segment", "pose", "obb"):
            for branch in head.cv3:  # class logits per stride: class 0 everywhere, nothing else
                bias = branch[-1].bias
                bias.fill_(-10.0)
                bias[0] = 4.0
        if task == "segment":  # positive prototypes and coefficients: each mask fills its box
            head.proto.cv3.bn.bias.fill_(3.0)
            for branch in head.cv4:
                branch[-1].bias.fill_(1.0)
        elif task == "classify":
            head.linear.bias.copy_(torch.arange(len(class_names), 0, -1, dtype=torch.float) * 2)
    if task == "pose":
        net.kpt_names = {key: list(KEYPOINT_NAMES) for key in range(len(class_names))}
    model = YOLO(config if task != "rtdetr" else "yolo11n.yaml", task=net.task)
    model.model = net
    path.parent.mkdir(parents=True, exist_ok=True)
    model.save(path)
    return path


def make_images(folder: Path, n: int, seed: int = 0) -> list[Path]:
    import cv2
    import numpy as np

    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    sizes = [(120, 160), (150, 200), (128, 96), (240, 320)]
    paths: list[Path] = []
    for i in range(n):
        height, width = sizes[i % len(sizes)]
        image = rng.integers(0, 80, size=(height, width, 3), dtype=np.uint8)
        for _ in range(2):
            x1, y1 = int(rng.integers(0, width // 2)), int(rng.integers(0, height // 2))
            x2, y2 = x1 + int(rng.integers(10, width // 2)), y1 + int(rng.integers(10, height // 2))
            colour = tuple(int(c) for c in rng.integers(100, 256, size=3))
            cv2.rectangle(image, (x1, y1), (x2, y2), colour, thickness=-1)
        path = folder / f"img{i}.jpg"
        if not cv2.imwrite(str(path), image):
            raise RuntimeError(f"could not write {path}")
        paths.append(path)
    return paths


def write_corrupt(path: Path) -> Path:
    """A file named like a JPEG whose content is not an image."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\xff\xd8\xff\xe0 this is not really a jpeg " * 8)
    return path


class RecordingContext:
    """Builds `RunContext`s and remembers what the runner reported."""

    def __init__(self, cancel_after: int | None = None) -> None:
        self.progress: list[Any] = []
        self.cancel_after = cancel_after
        """Ask for cancel once this many images are done."""

    def report(self, progress: Any) -> None:
        self.progress.append(progress)

    def should_cancel(self) -> bool:
        done = self.progress[-1].done if self.progress else 0
        return self.cancel_after is not None and done >= self.cancel_after

    def context(
        self,
        workdir: Path,
        inputs: list[Path],
        model: str = "tiny",
        device: str = "cpu",
        **params: Any,
    ) -> Any:
        from yolo_orch.domain import Job, JobKind, JobState, spec_of
        from yolo_orch.runners.base import RunContext

        job = Job(
            id="job-1",
            seq=1,
            kind=JobKind.INFERENCE,
            state=JobState.RUNNING,
            model=model,
            spec=spec_of(
                JobKind.INFERENCE,
                {
                    "inputs": [p.name for p in inputs],
                    "files": [{"path": str(p), "name": p.name} for p in inputs],
                    "params": params,
                },
            ),
            priority=0,
            gpus=1,
            attempt=1,
            max_attempts=3,
            created_at=datetime.now(UTC),
        )
        return RunContext(
            job=job,
            devices=(device,),
            workdir=workdir,
            report_progress=self.report,
            should_cancel=self.should_cancel,
        )


def fixed_resolver(weights: dict[str, Any]) -> Callable[[str], Any]:
    """A `resolve_weights` over a dict of model ref -> `ResolvedWeights`."""
    from yolo_orch.errors import ModelNotFound

    def resolve(ref: str) -> Any:
        try:
            return weights[ref]
        except KeyError:
            raise ModelNotFound(ref) from None

    return resolve
