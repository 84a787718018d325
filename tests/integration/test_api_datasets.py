"""/v1/datasets through the app's real lifespan: create, list, get with counts, the zip, an
item's image, delete; the problems each refusal answers; and who may write."""

from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import serve
from tests.support.problems import assert_problem
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.files.managed_datasets import ManagedDatasets

BOX = "0 0.5 0.5 0.2 0.2"


@pytest.fixture
async def served(
    tmp_path: Path, settings_factory: Callable[..., Settings]
) -> AsyncIterator[tuple[httpx.AsyncClient, ManagedDatasets]]:
    settings = settings_factory(data_roots=[tmp_path / "data"])
    app = create_app(settings)
    async with serve(app) as client:
        yield client, app.state.services.datasets


async def test_a_dataset_is_created_filled_counted_zipped_and_deleted(
    served: tuple[httpx.AsyncClient, ManagedDatasets], tmp_path: Path
) -> None:
    client, datasets = served
    created = await client.post(
        "/v1/datasets", json={"name": "cars", "task": "detect", "names": ["car", "bus"]}
    )
    assert created.status_code == 201, created.text
    assert created.headers["location"] == "/v1/datasets/cars"
    assert created.json()["data"] == "dataset:cars"
    assert (tmp_path / "data" / "datasets" / "cars" / "data.yaml").is_file()

    first = datasets.add("cars", b"jpeg-0", ".jpg", [BOX, "1 0.1 0.1 0.1 0.1"], source="model")
    datasets.add("cars", b"jpeg-1", ".jpg", [BOX], source="model", model_id="m1", job_id="j1")
    datasets.set_labels("cars", first, [BOX], source="annotation")

    body = (await client.get("/v1/datasets/cars")).json()
    assert body["items"] == 2
    assert body["splits"]["train"] == {"images": 1, "instances": {"car": 1}}
    assert body["splits"]["val"] == {"images": 1, "instances": {"car": 1}}
    assert body["sources"] == {"model": 1, "annotation": 1}
    listed = (await client.get("/v1/datasets")).json()["datasets"]
    assert [d["name"] for d in listed] == ["cars"]

    image = await client.get(f"/v1/datasets/cars/items/{first}/image")
    assert (image.status_code, image.content) == (200, b"jpeg-0")
    assert image.headers["content-type"] == "image/jpeg"

    download = await client.get("/v1/datasets/cars/zip")
    assert download.status_code == 200
    assert download.headers["content-type"] == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(download.content))
    names = set(archive.namelist())
    assert f"cars/images/train/{first}.jpg" in names
    assert archive.read(f"cars/labels/train/{first}.txt").decode() == f"{BOX}\n"
    data = yaml.safe_load(archive.read("cars/data.yaml"))
    assert (data["path"], data["names"]) == (".", {0: "car", 1: "bus"})

    assert (await client.delete("/v1/datasets/cars")).status_code == 204
    assert_problem(await client.get("/v1/datasets/cars"), 404, "dataset_not_found")
    assert not (tmp_path / "data" / "datasets" / "cars").exists()


async def test_refusals_are_problems_that_change_nothing(
    served: tuple[httpx.AsyncClient, ManagedDatasets],
) -> None:
    client, datasets = served
    body = {"name": "cars", "task": "detect", "names": ["car"]}
    assert (await client.post("/v1/datasets", json=body)).status_code == 201
    assert_problem(await client.post("/v1/datasets", json=body), 409, "dataset_exists")
    for bad in (
        {**body, "name": "../up"},
        {**body, "name": "Cars"},
        {**body, "task": "depth"},
        {**body, "names": []},
        {**body, "name": "pose1", "task": "pose"},  # no kpt_shape
        {**body, "name": "dup", "names": ["a", "a"]},
    ):
        assert_problem(await client.post("/v1/datasets", json=bad), 422, "invalid_request")
    assert [d.name for d in datasets.list()] == ["cars"]
    assert_problem(await client.get("/v1/datasets/nope"), 404, "dataset_not_found")
    assert_problem(await client.get("/v1/datasets/.hidden"), 404, "dataset_not_found")
    assert_problem(await client.get("/v1/datasets/nope/zip"), 404, "dataset_not_found")
    assert_problem(await client.delete("/v1/datasets/nope"), 404, "dataset_not_found")
    assert_problem(
        await client.get("/v1/datasets/cars/items/000000-abcdef/image"),
        404,
        "dataset_item_not_found",
    )


async def test_writes_need_models_write_and_reads_any_token(
    tmp_path: Path, settings_factory: Callable[..., Settings]
) -> None:
    tokens = [
        {"sha256": hashlib.sha256(token.encode()).hexdigest(), "scope": scope}
        for token, scope in (("reader", "jobs"), ("writer", "models:write"))
    ]
    settings = settings_factory(data_roots=[tmp_path / "data"], tokens=tokens)
    async with serve(create_app(settings)) as client:
        body = {"name": "cars", "task": "detect", "names": ["car"]}
        reader = {"Authorization": "Bearer reader"}
        writer = {"Authorization": "Bearer writer"}
        refused = await client.post("/v1/datasets", json=body, headers=reader)
        assert_problem(refused, 403, "forbidden")
        assert (await client.post("/v1/datasets", json=body, headers=writer)).status_code == 201
        assert (await client.get("/v1/datasets/cars", headers=reader)).status_code == 200
        assert_problem(await client.delete("/v1/datasets/cars", headers=reader), 403, "forbidden")
        assert (await client.delete("/v1/datasets/cars", headers=writer)).status_code == 204


async def test_an_items_image_opens_with_the_datasets_key_in_place_of_a_token(
    tmp_path: Path, settings_factory: Callable[..., Settings]
) -> None:
    """What Label Studio's pages do: load a pushed task's image with no Authorization header."""
    tokens = [{"sha256": hashlib.sha256(b"reader").hexdigest(), "scope": "jobs"}]
    settings = settings_factory(data_roots=[tmp_path / "data"], tokens=tokens)
    application = create_app(settings)
    async with serve(application) as client:
        datasets: ManagedDatasets = application.state.services.datasets
        for name in ("cars", "bikes"):
            datasets.create(name, "detect", ["car"])
        item = datasets.add("cars", b"jpeg-0", ".jpg", [BOX], source="model")
        key = datasets.image_key("cars")
        assert datasets.image_key("cars") == key  # kept: the URLs already pushed stay valid
        url = f"/v1/datasets/cars/items/{item}/image"

        image = await client.get(url, params={"key": key})
        assert (image.status_code, image.content) == (200, b"jpeg-0")
        assert_problem(await client.get(url), 401, "unauthorized")
        for wrong in (key[:-1], datasets.image_key("bikes")):
            assert_problem(await client.get(url, params={"key": wrong}), 403, "forbidden")
        # An empty key is no key: a token is asked for.
        assert_problem(await client.get(url, params={"key": ""}), 401, "unauthorized")
        unknown = "/v1/datasets/nope/items/000000-abcdef/image"
        assert_problem(await client.get(unknown, params={"key": key}), 403, "forbidden")
        # The key opens that route only, and the API never shows it.
        assert_problem(
            await client.get("/v1/datasets/cars", params={"key": key}), 401, "unauthorized"
        )
        shown = await client.get("/v1/datasets/cars", headers={"Authorization": "Bearer reader"})
        assert key not in shown.text
