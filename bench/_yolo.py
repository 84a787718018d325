"""A workspace for benchmarks of the real runtime on this host: a tiny real checkpoint under a
model root, generated images (and a tiny training set) under a data root, a server with
`runtime = "auto"` over them, and the checkpoint imported into its registry as `tiny`."""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench._server import running_server
from yolo_orch.testing import Server
from yolo_orch.testing.training import make_dataset
from yolo_orch.testing.yolo import build_checkpoint, ensure_ultralytics, make_images

MODEL = "tiny"
JOB_TIMEOUT_S = 600.0
"""How long a benchmark waits for one real job (`wait_terminal` long-polls meanwhile)."""


@dataclass(frozen=True)
class Workspace:
    root: Path
    data: Path
    """The server's data root."""
    weights: Path
    """The checkpoint, `tiny.pt`, under the server's model root."""


@contextlib.contextmanager
def workspace(image_sets: dict[str, int], dataset: bool = False) -> Iterator[Workspace]:
    """`image_sets`: folder name -> image count, written under the data root."""
    with tempfile.TemporaryDirectory(prefix="yolo-orch-bench-ws-") as tmp:
        root = Path(tmp)
        ensure_ultralytics(root)  # offline and quiet, before anything imports ultralytics
        data = root / "data"
        for seed, (name, count) in enumerate(sorted(image_sets.items())):
            make_images(data / name, count, seed=seed)
        if dataset:
            make_dataset(data / "train-set", n_train=16, n_val=4, size=64)
        weights = build_checkpoint(root / "weights" / f"{MODEL}.pt")
        yield Workspace(root, data, weights)


@contextlib.contextmanager
def real_server(ws: Workspace, **settings: Any) -> Iterator[Server]:
    """A `runtime = "auto"` server over `ws`, with the checkpoint imported as `tiny`."""
    with running_server(
        runtime="auto",
        data_roots=[ws.data],
        model_roots=[ws.weights.parent],
        max_files_per_job=1000,
        **settings,
    ) as server:
        with httpx.Client(base_url=server.url, timeout=120) as client:
            response = client.post("/v1/models", json={"path": ws.weights.name})
            if response.status_code not in (200, 201):
                raise RuntimeError(f"model import: {response.status_code} {response.text}")
        yield server


def inference_job(inputs: list[str], imgsz: int) -> dict[str, Any]:
    return {"kind": "inference", "model": MODEL, "inputs": inputs, "params": {"imgsz": imgsz}}


def training_probe(client: httpx.Client, **params: object) -> httpx.Response:
    """POST a small real training job on the generated dataset (see `workspace(dataset=True)`)."""
    body = {
        "kind": "training",
        "model": MODEL,
        "dataset": "train-set/data.yaml",
        "params": {"epochs": 2, "imgsz": 64, "batch": 8, **params},
    }
    return client.post("/v1/jobs", json=body)


TRAIN_SETTINGS = {"imgsz": 64, "batch": 8, "workers": 0, "seed": 0}
"""The training benches' settings, the same on the server's side and the direct one."""


def train_directly(architecture: str, dataset: Path, epochs: int, threads: int) -> float:
    """What the runner asks of ultralytics, without the server (offline: see `workspace`)."""
    import torch
    from ultralytics.models import YOLO

    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory() as project:
        data = str(dataset)
        if dataset.is_file():  # ultralytics reads a relative `path` from the working directory
            absolute = Path(project) / "data.yaml"
            absolute.write_text(dataset.read_text().replace("path: .", f"path: {dataset.parent}"))
            data = str(absolute)
        started = time.perf_counter()
        YOLO(architecture).train(
            data=data,
            epochs=epochs,
            device="cpu",
            project=project,
            name="direct",
            amp=False,
            compile=False,
            plots=False,
            deterministic=False,
            verbose=False,
            **TRAIN_SETTINGS,
        )
        return time.perf_counter() - started
