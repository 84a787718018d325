"""Label Studio's ML backend (/ls/{dataset}) on the simulated runtime, with the payloads Label
Studio 1.23 sends (`ml/api_connector.py`: predict, setup, health, versions; `webhooks/`: the
annotation events, START_TRAINING from `MLApi.train`)."""

from __future__ import annotations

import base64
import hashlib
import io
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from fastapi import FastAPI
from PIL import Image

from tests.conftest import serve
from tests.support.problems import assert_problem
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.files.managed_datasets import ManagedDatasets
from yolo_orch.labelling.ls_backend import LabelStudioBackend
from yolo_orch.labelling.ls_images import LabelStudioImages

LABELLING_TOKEN = "labelling-token-for-tests"
JOBS_TOKEN = "jobs-token-for-tests"
NAMES = ["person", "bicycle", "car", "dog"]  # the simulated model's classes
CONFIG = (
    "<View><Image name='image' value='$image'/><RectangleLabels name='label' toName='image'>"
    + "".join(f"<Label value='{name}'/>" for name in NAMES)
    + "</RectangleLabels></View>"
)
PROJECT = {"id": 7, "label_config": CONFIG, "title": "cars"}


def basic(token: str) -> dict[str, str]:
    """What Label Studio sends with an ML backend's Basic auth (any user, the token)."""
    return {"Authorization": "Basic " + base64.b64encode(f"ls:{token}".encode()).decode()}


AUTH = basic(LABELLING_TOKEN)


def jpeg() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), "gray").save(out, format="JPEG")
    return out.getvalue()


@pytest.fixture
async def app(settings_factory: Callable[..., Settings], tmp_path: Path) -> AsyncIterator[FastAPI]:
    (tmp_path / "data").mkdir()
    tokens = [
        {"sha256": hashlib.sha256(LABELLING_TOKEN.encode()).hexdigest(), "scope": "labelling"},
        {"sha256": hashlib.sha256(JOBS_TOKEN.encode()).hexdigest(), "scope": "jobs"},
    ]
    app = create_app(settings_factory(tokens=tokens, data_roots=[tmp_path / "data"]))
    async with serve(app) as client:
        app.state.test_client = client
        yield app


@pytest.fixture
def client(app: FastAPI) -> httpx.AsyncClient:
    test_client: httpx.AsyncClient = app.state.test_client
    return test_client


def datasets(app: FastAPI) -> ManagedDatasets:
    found: ManagedDatasets = app.state.services.datasets
    return found


def dataset(app: FastAPI, **labelling: Any) -> list[str]:
    """A detect dataset `ds` predicted by `sim`, with three items; their ids."""
    store = datasets(app)
    store.create("ds", "detect", NAMES, labelling={"model": "sim", **labelling})
    return [store.add("ds", jpeg(), ".jpg", [], source="model") for _ in range(3)]


def item_url(item: str) -> str:
    return f"http://yolo-orch:8000/v1/datasets/ds/items/{item}/image"


def task(task_id: int, image: str) -> dict[str, Any]:
    """As `TaskSimpleSerializer` gives a task to `/predict`."""
    return {
        "id": task_id,
        "data": {"image": image},
        "annotations": [],
        "predictions": [],
        "project": PROJECT["id"],
        "meta": {},
        "is_labeled": False,
    }


def predict_request(*tasks: dict[str, Any]) -> dict[str, Any]:
    return {
        "tasks": list(tasks),
        "project": "7.1733400000",
        "label_config": CONFIG,
        "params": {"login": None, "password": None, "context": None},
    }


async def test_health_and_setup_answer_the_model_version(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    dataset(app)

    health = await client.get("/ls/ds/health", headers=AUTH)
    setup = await client.post(
        "/ls/ds/setup",
        json={"project": "7.1733400000", "schema": CONFIG, "hostname": "http://ls:8080"},
        headers=AUTH,
    )
    versions = await client.get("/ls/ds/versions", headers=AUTH)

    assert health.status_code == 200
    assert health.json()["status"] == "UP"
    assert setup.json() == {"model_version": "sim"}
    assert versions.json() == {"versions": ["sim"]}


async def test_setup_refuses_what_it_cannot_serve(app: FastAPI, client: httpx.AsyncClient) -> None:
    datasets(app).create("bare", "detect", NAMES)
    hostile = '<!DOCTYPE v [<!ENTITY a "aaaa">]><View>&a;</View>'

    assert_problem(await client.get("/ls/nope/health", headers=AUTH), 404, "dataset_not_found")
    assert_problem(
        await client.post("/ls/bare/setup", json={"schema": CONFIG}, headers=AUTH),
        409,
        "labelling_not_set",
    )
    dataset(app)
    assert_problem(
        await client.post("/ls/ds/setup", json={"schema": hostile}, headers=AUTH),
        422,
        "label_config_invalid",
    )


async def test_predict_runs_one_job_for_the_tasks_it_can_read(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    items = dataset(app)
    tasks = [
        task(2, item_url(items[0])),
        task(3, "/data/upload/7/x.jpg"),
        task(5, item_url(items[1])),
    ]

    response = await client.post("/ls/ds/predict", json=predict_request(*tasks), headers=AUTH)

    assert response.status_code == 200, response.text
    body = response.json()
    results = body["results"]
    assert len(results) == 3
    assert body["model_version"] == "sim"
    # task-2: person and car; task-5: bicycle, car and dog (the simulated model's, by name)
    labels = [[item["value"]["rectanglelabels"][0] for item in each["result"]] for each in results]
    assert labels == [["person", "car"], [], ["bicycle", "car", "dog"]]
    first = results[0]["result"][0]
    assert first["from_name"] == "label"
    assert first["to_name"] == "image"
    assert 0 <= first["value"]["x"] <= 100
    assert first["original_width"] == 640
    assert results[0]["score"] is not None
    assert results[1]["score"] is None
    jobs = (await client.get("/v1/jobs", headers={"Authorization": f"Bearer {JOBS_TOKEN}"})).json()
    inference = [job for job in jobs["jobs"] if job["kind"] == "inference"]
    assert len(inference) == 1
    assert inference[0]["inputs"] == ["task-2", "task-5"]


def annotation_event(action: str, annotation_id: int, image: str, *labels: str) -> dict[str, Any]:
    """A webhook as Label Studio sends it for an annotation (`AnnotationWebhookSerializer`,
    its task nested)."""
    size = {"original_width": 64, "original_height": 48, "image_rotation": 0}
    result = [
        {
            "id": f"r{n}",
            "type": "rectanglelabels",
            "from_name": "label",
            "to_name": "image",
            "origin": "manual",
            "value": {"x": 10.0 * n, "y": 20.0, "width": 25.0, "height": 50.0, "rotation": 0}
            | {"rectanglelabels": [label]},
        }
        | size
        for n, label in enumerate(labels)
    ]
    return {
        "action": action,
        "annotation": {
            "id": annotation_id,
            "result": result,
            "was_cancelled": False,
            "ground_truth": False,
            "task": 2,
            "project": PROJECT["id"],
            "completed_by": 1,
        },
        "task": {"id": 2, "data": {"image": image}, "project": PROJECT["id"]},
        "project": PROJECT,
    }


async def test_an_annotation_sets_its_items_labels_as_a_persons(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    items = dataset(app)
    event = annotation_event("ANNOTATION_CREATED", 41, item_url(items[0]), "car", "dog")

    response = await client.post("/ls/ds/webhook", json=event, headers=AUTH)

    assert response.status_code == 200, response.text
    assert response.json()["items"] == [items[0]]
    store = datasets(app)
    assert store.item_labels("ds", items[0]) == [
        "2 0.125000 0.450000 0.250000 0.500000",
        "3 0.225000 0.450000 0.250000 0.500000",
    ]
    assert [each.id for each in store.items("ds", source="annotation")] == [items[0]]
    assert store.get("ds").labelling["annotations_since_training"] == 1

    updated = annotation_event("ANNOTATION_UPDATED", 41, item_url(items[0]), "person")
    assert (await client.post("/ls/ds/webhook", json=updated, headers=AUTH)).status_code == 200
    assert store.item_labels("ds", items[0]) == ["0 0.125000 0.450000 0.250000 0.500000"]
    assert store.get("ds").labelling["annotations_since_training"] == 1  # an update: no new one

    deleted = {"action": "ANNOTATIONS_DELETED", "annotations": [{"id": 41}], "project": PROJECT}
    assert (await client.post("/ls/ds/webhook", json=deleted, headers=AUTH)).json()["items"] == [
        items[0]
    ]
    assert store.items("ds", source="annotation") == []
    assert store.item_labels("ds", items[0]) == ["0 0.125000 0.450000 0.250000 0.500000"]


async def test_other_actions_are_answered_and_ignored(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    dataset(app)
    event = {"action": "PROJECT_UPDATED", "project": PROJECT}
    response = await client.post("/ls/ds/webhook", json=event, headers=AUTH)
    assert response.json() == {"status": "ignored", "action": "PROJECT_UPDATED"}


async def test_the_nth_annotation_starts_one_training_chain(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    # `sim` cannot be promoted (an alias points to registry models): no promote step here
    items = dataset(app, train_after=2, train={"sim_seconds": 5})
    jobs_auth = {"Authorization": f"Bearer {JOBS_TOKEN}"}

    first = annotation_event("ANNOTATION_CREATED", 1, item_url(items[0]), "car")
    second = annotation_event("ANNOTATION_CREATED", 2, item_url(items[1]), "dog")
    assert "job" not in (await client.post("/ls/ds/webhook", json=first, headers=AUTH)).json()
    started = (await client.post("/ls/ds/webhook", json=second, headers=AUTH)).json()["job"]

    assert started is not None
    chain = (await client.get(f"/v1/chains/{started}", headers=jobs_auth)).json()
    assert [step["kind"] for step in chain["steps"]] == ["training", "validation"]
    assert chain["steps"][0]["dataset"] == "dataset:ds"
    assert datasets(app).get("ds").labelling["annotations_since_training"] == 0
    # While it runs, Label Studio's Start training and POST /train answer the same chain.
    again = await client.post("/ls/ds/webhook", json={"action": "START_TRAINING"}, headers=AUTH)
    assert again.json()["job"] == started
    train = await client.post("/ls/ds/train", json={}, headers=AUTH)
    assert train.status_code == 201
    assert train.json() == {"job": started}
    trainings = (await client.get("/v1/jobs?kind=training", headers=jobs_auth)).json()["jobs"]
    assert len(trainings) == 1
    cancel = await client.post(f"/v1/chains/{started}/cancel", headers=jobs_auth)
    assert cancel.status_code == 200


async def test_only_a_labelling_token_opens_ls_and_it_opens_nothing_else(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    dataset(app)
    bearer = {"Authorization": f"Bearer {LABELLING_TOKEN}"}

    assert_problem(await client.get("/ls/ds/health"), 401, "unauthorized")
    assert_problem(await client.get("/ls/ds/health", headers=basic("guess")), 401, "unauthorized")
    assert (await client.get("/ls/ds/health", headers=bearer)).status_code == 200
    jobs = {"Authorization": f"Bearer {JOBS_TOKEN}"}
    assert_problem(await client.get("/ls/ds/health", headers=jobs), 403, "forbidden")
    assert_problem(await client.get("/v1/jobs", headers=bearer), 403, "forbidden")
    # Basic auth is Label Studio's, for /ls/ only.
    assert_problem(await client.get("/v1/jobs", headers=basic(JOBS_TOKEN)), 401, "unauthorized")


def label_studio_images(served: list[str]) -> LabelStudioImages:
    """A Label Studio serving its uploads (JPEGs) to a legacy token; `served` lists the paths."""

    def answer(request: httpx.Request) -> httpx.Response:
        served.append(request.url.path)
        return httpx.Response(200, content=jpeg(), headers={"content-type": "image/jpeg"})

    return LabelStudioImages(
        "http://ls:8080", "legacy", max_bytes=1 << 20, transport=httpx.MockTransport(answer)
    )


async def test_label_studios_own_images_are_read_from_it_and_become_items_once(
    app: FastAPI, tmp_path: Path
) -> None:
    dataset(app)
    services = app.state.services
    served: list[str] = []
    backend = LabelStudioBackend(
        services.datasets,
        services.jobs,
        services.models,
        label_studio_images(served),
        scratch=tmp_path / "data" / "scratch",
        predict_wait_s=10,
        file_limiter=anyio.CapacityLimiter(2),
    )
    upload = "/data/upload/7/0a1b-street.jpg"

    predicted = await backend.predict("ds", [task(2, upload)], CONFIG)

    assert [item["value"]["rectanglelabels"][0] for item in predicted[0]["result"]] == [
        "person",
        "car",
    ]
    assert served == [upload]
    assert list((tmp_path / "data" / "scratch").iterdir()) == []  # the read image is gone
    store = datasets(app)
    before = len(store.items("ds"))
    created = annotation_event("ANNOTATION_CREATED", 9, upload, "car")
    item = (await backend.webhook("ds", created))["items"][0]
    assert len(store.items("ds")) == before + 1
    assert store.item_labels("ds", item) == ["2 0.125000 0.450000 0.250000 0.500000"]
    updated = annotation_event("ANNOTATION_UPDATED", 9, upload, "dog")
    assert (await backend.webhook("ds", updated))["items"] == [item]  # the same item
    assert len(store.items("ds")) == before + 1
    assert store.item_labels("ds", item) == ["3 0.125000 0.450000 0.250000 0.500000"]


async def test_an_image_it_cannot_read_fails_the_annotation_only(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    dataset(app)  # the app has no label_studio_url
    event = annotation_event("ANNOTATION_CREATED", 3, "/data/upload/7/a.jpg", "car")
    response = await client.post("/ls/ds/webhook", json=event, headers=AUTH)
    assert_problem(response, 422, "task_image_unavailable")
