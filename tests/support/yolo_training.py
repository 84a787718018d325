"""A registry stand-in and a chunked DataParallel, for the tests of training runners."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from yolo_orch.domain import JsonObject


class Registry:
    """A stand-in `register_model` that keeps a copy of each file."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.calls: list[tuple[Path, str]] = []

    def __call__(self, path: Path, name: str, job_id: str) -> JsonObject:
        self.folder.mkdir(parents=True, exist_ok=True)
        kept = shutil.copyfile(path, self.folder / f"{name}.pt")
        self.calls.append((Path(kept), name))
        return {"id": f"id-{len(self.calls)}", "name": name}


def chunked_parallel(calls: list[int]) -> Callable[..., Any]:
    """A CPU stand-in for `data_parallel`: one chunk of images per lane, outputs concatenated
    along the batch dimension as DataParallel's gather does."""

    def make(model: Any, lanes: tuple[str, ...]) -> Callable[[Any], Any]:
        def run(images: Any) -> Any:
            calls.append(images.shape[0])
            return gather([model(part) for part in images.chunk(len(lanes))])

        return run

    return make


def gather(outputs: list[Any]) -> Any:
    import torch

    first = outputs[0]
    if isinstance(first, torch.Tensor):
        return torch.cat(outputs, dim=0)
    if isinstance(first, dict):
        return {key: gather([o[key] for o in outputs]) for key in first}
    return type(first)(gather(list(parts)) for parts in zip(*outputs, strict=True))
