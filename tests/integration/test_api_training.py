"""Training through the HTTP API on the CPU: a tiny generated dataset trains for 2 epochs, the
model it produces enters the registry and serves an inference job; unsafe datasets are refused
before anything runs."""

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
from yolo_orch.testing.training import make_dataset
from yolo_orch.testing.yolo import build_checkpoint, ensure_ultralytics

FAST = {"epochs": 2, "imgsz": 64, "batch": 8}


@pytest.fixture
async def client(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    settings_factory: Callable[..., Settings],
) -> AsyncIterator[httpx.AsyncClient]:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    data, weights = tmp_path / "data", tmp_path / "weights"
    make_dataset(data / "ds")
    build_checkpoint(weights / "taken.pt")
    settings = settings_factory(
        runtime="auto", database_url="", data_roots=[data], model_roots=[weights]
    )
    async with serve(create_app(settings)) as client:
        yield client


def training(**fields: Any) -> dict[str, Any]:
    return {"kind": "training", "model": "yolo11n.yaml", "dataset": "ds/data.yaml", **fields}


async def test_a_trained_model_is_registered_and_serves_inference(
    client: httpx.AsyncClient,
) -> None:
    job = await client.post("/v1/jobs", json=training(params={**FAST, "output_name": "tiny"}))
    assert job.status_code == 202, job.text
    done = await wait_terminal(client, job.json()["id"], deadline_s=180)
    assert done["state"] == "succeeded", done
    assert done["devices"] == ["cpu"]
    assert (done["progress"]["done"], done["progress"]["total"]) == (4, 4)
    assert done["progress"]["detail"]["epoch"] == 2
    assert done["result"]["epochs"] == 2
    assert set(done["result"]["metrics"]) == {"precision", "recall", "mAP50", "mAP50-95"}

    model = (await client.get("/v1/models/tiny")).json()
    assert model["id"] == done["result"]["model_id"]
    assert model["source"] == f"training:{done['id']}"
    assert model["class_names"] == ["red", "green", "blue"]

    history = (await client.get(f"/v1/jobs/{done['id']}/metrics")).json()
    assert [entry["epoch"] for entry in history] == [1, 2]
    artifacts = (await client.get(f"/v1/jobs/{done['id']}/artifacts")).json()["artifacts"]
    assert {a["name"] for a in artifacts} == {"best.pt", "last.pt", "results.csv"}
    result = (await client.get(f"/v1/jobs/{done['id']}/result")).json()
    assert result["model"]["id"] == model["id"]

    inference = {
        "kind": "inference",
        "model": "tiny",
        "inputs": ["ds/images/val/*.png"],
        "params": {"imgsz": 64},
    }
    response = await client.post("/v1/jobs", json=inference)
    assert response.status_code == 202, response.text
    infer = response.json()
    assert (await wait_terminal(client, infer["id"], deadline_s=60))["state"] == "succeeded"


async def test_unsafe_datasets_are_refused_and_nothing_runs(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    canary = tmp_path / "canary"
    dataset = tmp_path / "data" / "ds" / "data.yaml"
    original = dataset.read_text()
    dataset.write_text(original + f"download: import pathlib; pathlib.Path('{canary}').touch()\n")
    refused = await client.post("/v1/jobs", json=training(params=FAST))
    assert_problem(refused, 422, "unsafe_dataset")
    assert not canary.exists()

    dataset.write_text(original.replace("path:", "path: /etc #", 1))
    outside = await client.post("/v1/jobs", json=training(params=FAST))
    assert outside.status_code == 422
    assert_problem(
        await client.post("/v1/jobs", json=training(dataset="../x.yaml")), 422, "path_outside_roots"
    )
    assert (await client.get("/v1/jobs")).json()["jobs"] == []


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (training(model="nope.yaml"), 404, "model_not_found"),
        (training(model="rtdetr-l.yaml"), 404, "model_not_found"),
        (training(model="yolo11n-seg.yaml"), 422, "task_mismatch"),
        (training(model="yolo11n-cls.yaml"), 422, "task_mismatch"),
        (training(model="yolo11n-pose.yaml"), 422, "task_mismatch"),
        (training(params={"optimizer": "Lion"}), 422, "invalid_request"),
        (training(params={"colour": "red"}), 422, "invalid_request"),
        (training(params={"output_name": ".."}), 422, "invalid_request"),
        (training(dataset="ds/missing.yaml"), 422, "dataset_not_found"),
        (
            {"kind": "inference", "model": "yolo11n.yaml", "inputs": ["ds/images/val/*.png"]},
            404,
            "model_not_found",
        ),
    ],
)
async def test_bad_training_submissions(
    client: httpx.AsyncClient, body: dict[str, Any], status: int, code: str
) -> None:
    assert_problem(await client.post("/v1/jobs", json=body), status, code)


async def test_an_output_name_already_taken_is_refused(client: httpx.AsyncClient) -> None:
    assert (await client.post("/v1/models", json={"path": "taken.pt"})).status_code == 201
    taken = await client.post("/v1/jobs", json=training(params={**FAST, "output_name": "taken"}))
    assert_problem(taken, 409, "model_name_taken")
