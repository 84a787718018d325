"""Training and validation jobs that name a managed dataset (`dataset: "dataset:<name>"`): the
name resolves to the dataset's data.yaml, a missing dataset, one of another task or one with an
empty split is refused before anything runs; on the simulated runtime, and one real training
on the CPU."""

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
from yolo_orch.files.managed_datasets import ManagedDatasets
from yolo_orch.testing.training import make_dataset
from yolo_orch.testing.yolo import ensure_ultralytics

BOX = "0 0.5 0.5 0.2 0.2"


@pytest.fixture
async def sim(
    tmp_path: Path, settings_factory: Callable[..., Settings]
) -> AsyncIterator[tuple[httpx.AsyncClient, ManagedDatasets]]:
    app = create_app(settings_factory(data_roots=[tmp_path / "data"]))
    async with serve(app) as client:
        yield client, app.state.services.datasets


def sim_training(**fields: Any) -> dict[str, Any]:
    job = {"kind": "training", "model": "sim", "params": {"sim_seconds": 0.05, "sim_steps": 2}}
    return {**job, **fields}


async def test_a_simulated_training_and_its_chain_name_a_managed_dataset(
    sim: tuple[httpx.AsyncClient, ManagedDatasets],
) -> None:
    client, datasets = sim
    datasets.create("cars", "detect", ["car"])
    for _ in range(2):
        datasets.add("cars", b"x", ".jpg", [BOX], source="annotation")
    body = sim_training(dataset="dataset:cars", then={"validate": {}})
    submitted = await client.post("/v1/jobs", json=body)
    assert submitted.status_code == 202, submitted.text
    done = await wait_terminal(client, submitted.json()["id"])
    assert done["state"] == "succeeded", done
    assert done["dataset"] == "dataset:cars"
    chain = (await client.get(f"/v1/chains/{done['id']}")).json()
    validation = next(step for step in chain["steps"] if step["kind"] == "validation")
    assert validation["dataset"] == "dataset:cars"

    refused = await client.post("/v1/jobs", json=sim_training(dataset="dataset:nope"))
    assert_problem(refused, 422, "dataset_not_found")


@pytest.fixture
async def cpu(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    settings_factory: Callable[..., Settings],
) -> AsyncIterator[tuple[httpx.AsyncClient, ManagedDatasets]]:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    # the datasets folder outside the data roots: jobs read it all the same
    settings = settings_factory(
        runtime="auto",
        database_url="",
        data_roots=[tmp_path / "data"],
        datasets_dir=tmp_path / "managed",
    )
    app = create_app(settings)
    async with serve(app) as client:
        yield client, app.state.services.datasets


def _fill_from(source: Path, datasets: ManagedDatasets, name: str) -> None:
    """The images and labels of a generated dataset, added as items."""
    for image in sorted(source.glob("images/*/*.png")):
        label = source / "labels" / image.parent.name / f"{image.stem}.txt"
        lines = label.read_text().splitlines()
        datasets.add(name, image.read_bytes(), ".png", lines, source="annotation")


async def test_a_real_training_reads_a_managed_dataset_by_name(
    cpu: tuple[httpx.AsyncClient, ManagedDatasets], tmp_path: Path
) -> None:
    client, datasets = cpu
    datasets.create("shapes", "detect", ["red", "green", "blue"])
    datasets.create("empty", "detect", ["red"])
    make_dataset(tmp_path / "generated", n_train=8, n_val=2)
    _fill_from(tmp_path / "generated", datasets, "shapes")

    def training(dataset: str, model: str = "yolo11n.yaml") -> dict[str, Any]:
        params = {"epochs": 1, "imgsz": 64, "batch": 4, "output_name": "from-managed"}
        return {"kind": "training", "model": model, "dataset": dataset, "params": params}

    for dataset, model, status, code in (
        ("dataset:nope", "yolo11n.yaml", 422, "dataset_not_found"),
        ("dataset:shapes", "yolo11n-cls.yaml", 422, "task_mismatch"),
        ("dataset:empty", "yolo11n.yaml", 422, "invalid_dataset"),
    ):
        assert_problem(await client.post("/v1/jobs", json=training(dataset, model)), status, code)

    submitted = await client.post("/v1/jobs", json=training("dataset:shapes"))
    assert submitted.status_code == 202, submitted.text
    done = await wait_terminal(client, submitted.json()["id"], deadline_s=120)
    assert done["state"] == "succeeded", done
    model = (await client.get("/v1/models/from-managed")).json()
    assert model["class_names"] == ["red", "green", "blue"]
