"""Capture on the CPU with real models of each task a managed dataset holds: an inference job
stores exactly the images its rule selects, their labels its result entries' (as YOLO lines),
and a dataset of another task is refused at submission."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.conftest import serve, wait_terminal
from tests.support.problems import assert_problem
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.domain.managed_datasets import MANAGED_TASKS
from yolo_orch.files.managed_datasets import ManagedDatasets
from yolo_orch.labelling.yolo_labels import label_lines
from yolo_orch.testing.yolo import (
    CLASS_NAMES,
    build_task_checkpoint,
    ensure_ultralytics,
    make_images,
)

IMGSZ = 64
KPT_SHAPE = (17, 3)
"""A pose model's of `build_task_checkpoint`."""


@pytest.fixture(scope="module")
def model_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    root = tmp_path_factory.mktemp("weights")
    for task in MANAGED_TASKS:
        build_task_checkpoint(root / f"{task}.pt", task)
    return root


@pytest.fixture
def app(tmp_path: Path, model_root: Path, settings_factory: Callable[..., Settings]) -> FastAPI:
    data = tmp_path / "data"
    make_images(data / "shots", 5)
    return create_app(
        settings_factory(
            runtime="auto", database_url="", data_roots=[data], model_roots=[model_root]
        )
    )


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with serve(app) as http:
        yield http


def inference(task: str, capture: dict[str, Any]) -> dict[str, Any]:
    params = {"imgsz": IMGSZ, "capture": capture}
    return {"kind": "inference", "model": task, "inputs": ["shots/*.jpg"], "params": params}


@pytest.mark.parametrize("task", MANAGED_TASKS)
async def test_a_job_captures_the_selected_images_with_its_predictions_as_labels(
    app: FastAPI, client: httpx.AsyncClient, task: str
) -> None:
    imported = await client.post("/v1/models", json={"path": f"{task}.pt"})
    assert imported.status_code == 201, imported.text
    store: ManagedDatasets = app.state.services.datasets
    kpt_shape = KPT_SHAPE if task == "pose" else None
    store.create("seen", task, CLASS_NAMES, kpt_shape=kpt_shape)
    capture = {"into": "seen", "when": {"every_n": 2}}
    response = await client.post("/v1/jobs", json=inference(task, capture))
    assert response.status_code == 202, response.text
    job = await wait_terminal(client, response.json()["id"], deadline_s=120)
    assert job["state"] == "succeeded", job
    assert job["result"]["capture"] == {"selected": 3, "captured": 3, "capped": 0, "dropped": 0}

    images = (await client.get(f"/v1/jobs/{job['id']}/result")).json()["images"]
    chosen = [images[index] for index in (0, 2, 4)]  # the 1st, 3rd and 5th input
    expected = sorted(label_lines(task, image, CLASS_NAMES, kpt_shape) for image in chosen)
    items = store.items("seen")
    assert {(item.source, item.job_id, item.model_id) for item in items} == {
        ("model", job["id"], job["model_id"])
    }
    assert sorted(store.item_labels("seen", item.id) for item in items) == expected
    assert all(expected), "the biased heads predict something on every image"
    sizes = sorted(_size(store.item_image("seen", item.id)) for item in items)
    assert sizes == sorted((image["width"], image["height"]) for image in chosen)


def _size(path: Path) -> tuple[int, int]:
    from PIL import Image

    with Image.open(path) as image:
        assert image.format == "JPEG"
        return image.size


async def test_a_dataset_of_another_task_is_refused(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    assert (await client.post("/v1/models", json={"path": "detect.pt"})).status_code == 201
    store: ManagedDatasets = app.state.services.datasets
    store.create("poses", "pose", CLASS_NAMES, kpt_shape=KPT_SHAPE)
    response = await client.post(
        "/v1/jobs", json=inference("detect", {"into": "poses", "when": {"every_n": 1}})
    )
    assert_problem(response, 422, "task_mismatch")
    assert (await client.get("/v1/jobs")).json()["jobs"] == []
