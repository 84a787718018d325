"""One trainer class per task, each ultralytics' own task trainer with what a job server needs: the
DataParallel split over the job's lanes, and DataLoader workers that are never forked.

The split (measured in ULTRALYTICS.md): after ultralytics' set-up, the model is wrapped so that only
the batch's images go through `nn.DataParallel`; the predictions are gathered on the first lane
and the task's loss is computed once on the whole batch. The batch dict itself must not be
scattered: `batch_idx` holds global image indices, and each task's loss reads other keys with it
(`bboxes`, `masks`, `keypoints`, `cls`, `depth`, ...). BatchNorm statistics are per replica. The
split is injectable (`MakeParallel`) so it can be exercised on a CPU.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from yolo_orch.errors import InvalidJobInput

if TYPE_CHECKING:
    import torch
    from torch import nn

__all__ = [
    "MakeParallel",
    "RunImages",
    "cuda_index",
    "data_parallel",
    "trainer_class",
    "ultralytics_device",
    "wrap_parallel",
]

RunImages = Callable[["torch.Tensor"], Any]
"""Runs the model on a batch of images and returns its predictions on the first lane."""
MakeParallel = Callable[["nn.Module", tuple[str, ...]], RunImages]
"""Given the model (on the first lane) and all the job's lanes, how to split a batch across them."""


def data_parallel(model: nn.Module, lanes: tuple[str, ...]) -> RunImages:
    """`nn.DataParallel` over the job's CUDA lanes, gathering on the first."""
    import torch

    ids = [cuda_index(lane) for lane in lanes]
    if None in ids:
        raise InvalidJobInput(f"training on several lanes needs CUDA lanes, not {lanes!r}")
    device_ids = [i for i in ids if i is not None]
    parallel = torch.nn.DataParallel(model, device_ids=device_ids, output_device=device_ids[0])

    def run(images: torch.Tensor) -> Any:
        return parallel(images)

    return run


def ultralytics_device(lanes: tuple[str, ...]) -> str:
    """The first lane as ultralytics wants it: `"cpu"` or a bare CUDA index (never several: a
    device list makes ultralytics launch DDP worker processes)."""
    if not lanes:
        raise InvalidJobInput("the job holds no lane")
    first = lanes[0]
    if first == "cpu":
        return "cpu"
    index = cuda_index(first)
    if index is None:
        raise InvalidJobInput(f"cannot run ultralytics on lane {first!r}")
    return str(index)


def cuda_index(lane: str) -> int | None:
    prefix, _, index = lane.partition(":")
    return int(index) if prefix == "cuda" and index.isdigit() else None


def wrap_parallel(model: nn.Module, run_images: RunImages) -> nn.Module:
    """A model whose training forward runs only the images through `run_images` and computes the
    loss once on the whole batch. The inner model is `module`, so ultralytics' `unwrap_model`, EMA
    and checkpoints see through the wrapper."""
    return _parallel_model()(model, run_images)


def trainer_class(task: str) -> type[Any]:
    """The trainer for models of `task` (one of `yolo_orch.files.task_data.TASKS`)."""
    trainers = _trainers()
    if task not in trainers:
        raise InvalidJobInput(f"this server cannot train {task!r} models")
    return trainers[task]


@functools.cache
def _parallel_model() -> type[nn.Module]:
    """Defined on first use so importing this module stays cheap (and ultralytics is configured
    before its first import)."""
    from torch import nn

    class ParallelModel(nn.Module):
        def __init__(self, module: nn.Module, run_images: RunImages) -> None:
            super().__init__()
            self.module = module
            self.run_images = run_images  # a plain callable, not a registered submodule

        def forward(self, x: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(x, dict):  # a training batch: split the images only
                return self.module.loss(x, self.run_images(x["img"]))  # type: ignore[operator]
            return self.module(x, *args, **kwargs)

    return ParallelModel


@functools.cache
def _trainers() -> dict[str, type[Any]]:
    from ultralytics.models.yolo.classify import ClassificationTrainer
    from ultralytics.models.yolo.depth import DepthTrainer
    from ultralytics.models.yolo.detect import DetectionTrainer
    from ultralytics.models.yolo.obb import OBBTrainer
    from ultralytics.models.yolo.pose import PoseTrainer
    from ultralytics.models.yolo.segment import SegmentationTrainer
    from ultralytics.models.yolo.semantic import SemanticSegmentationTrainer

    parallel_model = _parallel_model()

    class JobTrainer:
        """Mixed in before an ultralytics trainer class."""

        parallel: Callable[[nn.Module], RunImages] | None = None
        model: Any

        def _setup_train(self) -> None:
            super()._setup_train()  # type: ignore[misc]
            if self.parallel is not None:
                self.model = parallel_model(self.model, self.parallel(self.model))

        def get_dataloader(self, *args: Any, **kwargs: Any) -> Any:
            loader = super().get_dataloader(*args, **kwargs)  # type: ignore[misc]
            if loader.num_workers > 0:  # never fork this multi-threaded process
                loader.multiprocessing_context = "forkserver"
            return loader

    bases = {
        "detect": DetectionTrainer,
        "segment": SegmentationTrainer,
        "pose": PoseTrainer,
        "obb": OBBTrainer,
        "classify": ClassificationTrainer,
        "semantic": SemanticSegmentationTrainer,
        "depth": DepthTrainer,
    }
    return {
        task: type(f"Job{base.__name__}", (JobTrainer, base), {}) for task, base in bases.items()
    }
