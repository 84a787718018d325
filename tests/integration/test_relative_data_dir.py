"""`make serve` keeps its data in `./var`: with the folders named relative to the working
directory, training, validation and export run through the real runtime on the CPU as they do
with absolute ones. (A relative data_dir once reached ultralytics as a training `project`, which
it files under its own runs folder: the epochs ran, then the job failed without its best.pt.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import serve, wait_terminal
from yolo_orch.app import create_app
from yolo_orch.config import load_settings
from yolo_orch.testing.training import make_dataset
from yolo_orch.testing.yolo import ensure_ultralytics

TINY = {"imgsz": 32}


async def test_training_validation_and_export_run_with_data_dir_relative_to_the_working_dir(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    monkeypatch.chdir(tmp_path)
    make_dataset(Path("data/ds"), n_train=8, n_val=2, size=32)
    settings = load_settings(
        data_dir=Path("./var"), data_roots=["data"], runtime="auto", shutdown_grace_s=2.0
    )
    assert settings.data_dir == tmp_path / "var"

    async with serve(create_app(settings)) as client:
        training = {
            "kind": "training",
            "model": "yolo11n.yaml",
            "dataset": "ds/data.yaml",
            "params": {**TINY, "epochs": 1, "batch": 8, "output_name": "tiny"},
        }
        trained = await _run(client, training)
        validation = {"kind": "validation", "model": "tiny", "dataset": "ds/data.yaml"}
        validated = await _run(client, {**validation, "params": TINY})
        exported = await _run(
            client, {"kind": "export", "model": "tiny", "params": {**TINY, "format": "torchscript"}}
        )

    assert exported["result"]["format"] == "torchscript"
    assert set(validated["result"]["metrics"]) >= {"precision", "recall", "mAP50", "mAP50-95"}
    run = tmp_path / "var" / "jobs" / trained["id"] / "train"
    assert (run / "weights" / "best.pt").is_file()  # where the server looks, not under runs/
    assert (tmp_path / "var" / "yolo-orch.db").is_file()


async def _run(client: httpx.AsyncClient, job: dict[str, Any]) -> dict[str, Any]:
    response = await client.post("/v1/jobs", json=job)
    assert response.status_code == 202, response.text
    done = await wait_terminal(client, response.json()["id"], deadline_s=180)
    assert done["state"] == "succeeded", done["error"]
    return done
