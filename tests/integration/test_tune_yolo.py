"""A real tune on the CPU: three 1-epoch trials of yolo11n.yaml on a small demo dataset, the first
at the default params. The search finds params at least as good as the default (the best trial
is one of the trials, the default's included), each trial registered its model under the name
the tune gave it, and the best's model id is the result's."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest

from tests.conftest import serve, wait_terminal
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.demo.dataset import DatasetSpec, make_dataset
from yolo_orch.jobs.tune import trial_model_name
from yolo_orch.testing.yolo import ensure_ultralytics


@pytest.fixture
async def client(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    settings_factory: Callable[..., Settings],
) -> AsyncIterator[httpx.AsyncClient]:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    data = tmp_path / "data"
    make_dataset(data / "shapes", DatasetSpec(train=48, val=16, test=0, size=64))
    settings = settings_factory(runtime="auto", database_url="", data_roots=[data])
    async with serve(create_app(settings)) as client:
        yield client


async def test_a_real_tune_finds_params_at_least_as_good_as_the_default(
    client: httpx.AsyncClient,
) -> None:
    body = {
        "kind": "tune",
        "model": "yolo11n.yaml",
        "dataset": "shapes/data.yaml",
        "params": {
            "space": {"lr0": {"low": 0.001, "high": 0.05, "log": True}},
            "trials": 3,
            "epochs": 1,
            "objective": "mAP50",
            "pruner": "none",
            "seed": 1,
            "base": {"imgsz": 64, "batch": 16, "optimizer": "SGD"},
        },
        "then": {"validate": {}},
    }
    response = await client.post("/v1/jobs", json=body)
    assert response.status_code == 202, response.text
    tune_id = response.json()["id"]
    done = await wait_terminal(client, tune_id, deadline_s=240)
    assert done["state"] == "succeeded", done["error"]

    result = (await client.get(f"/v1/jobs/{tune_id}/result")).json()
    trials = result["trials"]
    assert [t["state"] for t in trials] == ["complete"] * 3
    default = trials[0]
    assert default["params"] == {"lr0": 0.01}  # TrainingParams' default, the baseline
    assert result["best"]["value"] >= default["value"]
    for trial in trials:
        model = (await client.get(f"/v1/models/{trial['model_id']}")).json()
        assert model["name"] == trial_model_name(tune_id, trial["number"])
    assert done["result"]["best"]["model_id"] == result["best"]["model_id"]
    # The chain's validation scores the best trial's model, at the trials' size.
    (validation,) = (
        await client.get("/v1/jobs", params={"chain": tune_id, "kind": "validation"})
    ).json()["jobs"]
    validated = await wait_terminal(client, validation["id"], deadline_s=60)
    assert validated["state"] == "succeeded", validated["error"]
    assert validated["model_id"] == result["best"]["model_id"]
    assert validated["params"]["imgsz"] == 64
