"""`params.slice` through the HTTP API on the CPU: a detect job's sliced result; what a model's
task cannot slice, and slice params out of range, refused at submission, storing nothing."""

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
from yolo_orch.testing.yolo import build_task_checkpoint, ensure_ultralytics, make_images

SLICE = {"size": 64, "overlap": 0.25}


@pytest.fixture(scope="module")
def model_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    root = tmp_path_factory.mktemp("weights")
    for task in ("detect", "obb", "pose"):
        build_task_checkpoint(root / f"{task}.pt", task)
    return root


@pytest.fixture
async def client(
    tmp_path: Path, model_root: Path, settings_factory: Callable[..., Settings]
) -> AsyncIterator[httpx.AsyncClient]:
    data = tmp_path / "data"
    make_images(data / "shots", 2)
    settings = settings_factory(
        runtime="auto", database_url="", data_roots=[data], model_roots=[model_root]
    )
    async with serve(create_app(settings)) as http:
        for task in ("detect", "obb", "pose"):
            response = await http.post("/v1/models", json={"path": f"{task}.pt"})
            assert response.status_code == 201, response.text
        yield http


async def _submit(client: httpx.AsyncClient, model: str, **params: Any) -> httpx.Response:
    job = {"kind": "inference", "model": model, "inputs": ["shots/*.jpg"], "params": params}
    return await client.post("/v1/jobs", json=job)


async def _job_count(client: httpx.AsyncClient) -> int:
    return len((await client.get("/v1/jobs")).json()["jobs"])


async def test_a_sliced_detect_job_gives_whole_image_entries(client: httpx.AsyncClient) -> None:
    response = await _submit(client, "detect", imgsz=64, max_det=10, slice=SLICE)
    assert response.status_code == 202, response.text

    job = await wait_terminal(client, response.json()["id"], 60)

    assert job["state"] == "succeeded", job
    images = (await client.get(f"/v1/jobs/{job['id']}/result")).json()["images"]
    assert len(images) == 2
    for entry in images:
        assert 0 < len(entry["detections"]) <= 10
        for detection in entry["detections"]:
            box = detection["box"]
            assert 0 <= box["x1"] < box["x2"] <= entry["width"]
            assert 0 <= box["y1"] < box["y2"] <= entry["height"]


@pytest.mark.parametrize(
    ("model", "slicing", "named"),
    [("pose", SLICE, "params.slice"), ("obb", {**SLICE, "merge": "nmm"}, "nmm")],
)
async def test_what_a_models_task_cannot_slice_is_refused_storing_nothing(
    client: httpx.AsyncClient, model: str, slicing: dict[str, Any], named: str
) -> None:
    before = await _job_count(client)

    response = await _submit(client, model, imgsz=64, slice=slicing)

    assert_problem(response, 422, "task_mismatch")
    assert named in response.json()["detail"]
    assert await _job_count(client) == before


@pytest.mark.parametrize(
    "slicing", [{"size": 32}, {"overlap": 0.6}, {"merge": "wbf"}, {"size": 64, "tiles": 4}]
)
async def test_slice_params_out_of_range_are_refused(
    client: httpx.AsyncClient, slicing: dict[str, Any]
) -> None:
    before = await _job_count(client)

    response = await _submit(client, "detect", slice=slicing)

    assert response.status_code == 422, response.text
    assert await _job_count(client) == before
