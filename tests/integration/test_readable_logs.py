"""Job logs a person reads: a training logs one line per epoch, and no job's log carries
ultralytics' terminal escapes, banner or what-to-type-next lines."""

from __future__ import annotations

import re
from typing import Any

from tests.conftest import wait_terminal
from tests.support.export_host import IMGSZ, Host, host, host_settings
from yolo_orch.testing.training import make_dataset

__all__ = ["host", "host_settings"]  # the fixtures, shared with the export tests

_TERMINAL_NOISE = ("\x1b[", "netron", "yolo predict", "yolo val ", "Ultralytics 8", "🚀")


async def _run(host: Host, job: dict[str, Any]) -> tuple[dict[str, Any], str]:
    response = await host.client.post("/v1/jobs", json=job)
    assert response.status_code == 202, response.text
    done = await wait_terminal(host.client, response.json()["id"], deadline_s=300)
    assert done["state"] == "succeeded", done["error"]
    return done, (await host.client.get(f"/v1/jobs/{done['id']}/logs")).text


async def test_training_validation_and_export_logs_read_as_text(host: Host) -> None:
    make_dataset(host.data / "ds")
    await host.import_tiny()
    training = {
        "kind": "training",
        "model": "yolo11n.yaml",
        "dataset": "ds/data.yaml",
        "params": {"epochs": 2, "imgsz": IMGSZ, "batch": 8, "output_name": "trained"},
    }
    validation = {"kind": "validation", "model": "trained", "dataset": "ds/data.yaml"}
    export = {"kind": "export", "model": "tiny", "params": {"format": "onnx", "imgsz": IMGSZ}}

    _, trained = await _run(host, training)
    _, validated = await _run(host, {**validation, "params": {"imgsz": IMGSZ}})
    _, exported = await _run(host, export)

    epochs = [line for line in trained.splitlines() if re.search(r": epoch \d+/2: ", line)]
    assert len(epochs) == 2, trained
    assert ": epoch 1/2: train loss box " in epochs[0]
    assert re.search(
        r"; val loss box [0-9.e+-]+ cls .*; mAP50 \S+ mAP50-95 \S+; \d+\.\d s$", epochs[1]
    )
    assert "best.pt validated: mAP50 " in trained
    assert "export success" in exported  # ultralytics' own lines stay, in plain text
    for log in (trained, validated, exported):
        assert log.strip()
        for noise in _TERMINAL_NOISE:
            assert noise not in log, (noise, log)
