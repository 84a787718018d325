"""Training and validation of other tasks through the HTTP API on the CPU: a classification model
trains on an image folder and is validated; a dataset that does not fit the model's task is
refused at submission (`task_mismatch`) with nothing stored."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import serve, wait_terminal
from tests.support.problems import assert_problem
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.testing.task_datasets import make_task_dataset
from yolo_orch.testing.yolo import build_checkpoint, ensure_ultralytics

FAST = {"epochs": 1, "imgsz": 64, "batch": 4}


@pytest.fixture
async def client(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    settings_factory: Callable[..., Settings],
) -> AsyncIterator[httpx.AsyncClient]:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    data, weights = tmp_path / "data", tmp_path / "weights"
    for task in ("detect", "classify", "pose"):
        make_task_dataset(task, data / task, n_train=8, n_val=4)
    build_checkpoint(weights / "detector.pt")
    settings = settings_factory(
        runtime="auto", database_url="", data_roots=[data], model_roots=[weights]
    )
    async with serve(create_app(settings)) as client:
        yield client


def validation(**fields: Any) -> dict[str, Any]:
    return {"kind": "validation", "params": {"imgsz": 64, "batch": 2}, **fields}


async def test_a_classify_model_trains_on_a_folder_and_is_validated(
    client: httpx.AsyncClient,
) -> None:
    body = {
        "kind": "training",
        "model": "yolo11n-cls.yaml",
        "dataset": "classify",
        "params": {**FAST, "output_name": "colours"},
    }
    trained = await client.post("/v1/jobs", json=body)
    assert trained.status_code == 202, trained.text
    done = await wait_terminal(client, trained.json()["id"], deadline_s=120)
    assert done["state"] == "succeeded", done
    model = (await client.get("/v1/models/colours")).json()
    assert (model["task"], model["class_names"]) == ("classify", ["blue", "green", "red"])

    submitted = await client.post("/v1/jobs", json=validation(model="colours", dataset="classify"))
    assert submitted.status_code == 202, submitted.text
    assert submitted.json()["split"] == "val"
    job = await wait_terminal(client, submitted.json()["id"], deadline_s=60)
    assert job["state"] == "succeeded", job
    assert job["kind"] == "validation"
    assert job["progress"]["done"] == job["progress"]["total"] == 2
    assert set(job["result"]["metrics"]) == {"top1", "top5"}

    result = (await client.get(f"/v1/jobs/{job['id']}/result")).json()
    assert result["task"] == "classify"
    assert result["confusion_matrix"]["names"] == ["blue", "green", "red"]
    artifacts = (await client.get(f"/v1/jobs/{job['id']}/artifacts")).json()["artifacts"]
    assert "confusion_matrix.png" in {a["name"] for a in artifacts}
    listed = (await client.get("/v1/jobs", params={"kind": "validation"})).json()["jobs"]
    assert [j["id"] for j in listed] == [job["id"]]


def training(model: str, dataset: str) -> dict[str, Any]:
    return {"kind": "training", "model": model, "dataset": dataset, "params": FAST}


DETECT = "detect/data.yaml"


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (training("yolo11n-cls.yaml", DETECT), 422, "task_mismatch"),
        (training("yolo11n-pose.yaml", DETECT), 422, "task_mismatch"),
        (training("yolo11n.yaml", "pose/data.yaml"), 422, "task_mismatch"),
        (training("yolo11n.yaml", "classify"), 422, "task_mismatch"),
        (validation(model="detector", dataset="classify"), 422, "task_mismatch"),
        (validation(model="detector", dataset=DETECT, split="test"), 422, "invalid_dataset"),
        (validation(model="yolo11n.yaml", dataset=DETECT), 404, "model_not_found"),
        (validation(model="detector"), 422, "invalid_request"),
        (validation(model="detector", dataset=DETECT, split="train"), 422, "invalid_request"),
        (
            validation(model="detector", dataset=DETECT, params={"epochs": 1}),
            422,
            "invalid_request",
        ),
    ],
)
async def test_what_does_not_fit_is_refused_and_nothing_is_stored(
    client: httpx.AsyncClient, body: dict[str, Any], status: int, code: str
) -> None:
    assert (await client.post("/v1/models", json={"path": "detector.pt"})).status_code == 201

    assert_problem(await client.post("/v1/jobs", json=body), status, code)

    assert (await client.get("/v1/jobs")).json()["jobs"] == []


async def test_a_detection_model_is_validated_with_boxes_per_class(
    client: httpx.AsyncClient,
) -> None:
    assert (await client.post("/v1/models", json={"path": "detector.pt"})).status_code == 201
    submitted = await client.post("/v1/jobs", json=validation(model="detector", dataset=DETECT))
    assert submitted.status_code == 202, submitted.text

    job = await wait_terminal(client, submitted.json()["id"], deadline_s=60)

    assert job["state"] == "succeeded", job
    assert set(job["result"]["metrics"]) == {"precision", "recall", "mAP50", "mAP50-95"}
    result = (await client.get(f"/v1/jobs/{job['id']}/result")).json()
    assert result["confusion_matrix"]["names"] == ["red", "green", "blue", "background"]
    assert set(result["speed_ms_per_image"]) >= {"inference"}
