"""POST /v1/datasets/{name}/push and /pull through the app's real lifespan, with Label Studio
answered by a stand-in transport: the requests a push makes, and what each refusal answers
(nothing changes). The sync against a real Label Studio: tests/acceptance."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from PIL import Image

from tests.conftest import serve
from tests.support.problems import assert_problem
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.labelling.ls_sync import LabelStudioSync

BOXES = (
    '<View><Image name="image" value="$img"/><RectangleLabels name="label" toName="image">'
    '<Label value="car"/></RectangleLabels></View>'
)
LABEL_STUDIO = "http://label-studio.test:8080"
Handler = Callable[[httpx.Request], httpx.Response]


def jpeg() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 32)).save(buffer, format="JPEG")
    return buffer.getvalue()


class FakeLabelStudio:
    """Project 7 with `BOXES`; records what is imported."""

    def __init__(self) -> None:
        self.imported: list[dict[str, Any]] = []
        self.authorizations: set[str] = set()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.authorizations.add(request.headers.get("authorization", ""))
        if request.url.path == "/api/projects/7":
            return httpx.Response(200, json={"id": 7, "label_config": BOXES})
        if request.url.path == "/api/projects/7/import":
            self.imported.extend(json.loads(request.content))
            return httpx.Response(201, json={"task_count": len(self.imported)})
        return httpx.Response(404, json={"detail": "Not found."})


def with_label_studio(app: FastAPI, handler: Handler) -> None:
    services = app.state.services
    sync = LabelStudioSync(
        services.datasets, LABEL_STUDIO, "legacy-token", transport=httpx.MockTransport(handler)
    )
    app.state.services = dataclasses.replace(services, label_studio_sync=sync)


@pytest.fixture
async def app(
    tmp_path: Path, settings_factory: Callable[..., Settings]
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    application = create_app(settings_factory(data_roots=[tmp_path / "data"]))
    async with serve(application) as client:
        application.state.services.datasets.create("cars", "detect", ["car"])
        yield application, client


async def test_a_push_imports_each_item_with_its_url_on_this_server_and_its_prediction(
    app: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    application, client = app
    item = application.state.services.datasets.add(
        "cars", jpeg(), ".jpg", ["0 0.5 0.5 0.5 0.5"], source="model", model_id="m7"
    )
    fake = FakeLabelStudio()
    with_label_studio(application, fake)

    response = await client.post("/v1/datasets/cars/push", json={"project": 7})

    assert response.status_code == 200, response.text
    assert response.json() == {"project": 7, "pushed": 1, "already": 0, "predictions": 1}
    (task,) = fake.imported
    key = application.state.services.datasets.image_key("cars")
    assert task["data"] == {
        "img": f"http://localhost/v1/datasets/cars/items/{item}/image?key={key}",
        "yolo_orch_dataset": "cars",
        "yolo_orch_item": item,
    }
    (prediction,) = task["predictions"]
    assert prediction["model_version"] == "m7"
    assert prediction["result"][0]["value"]["rectanglelabels"] == ["car"]
    assert fake.authorizations == {"Token legacy-token"}
    again = await client.post("/v1/datasets/cars/push", json={"project": 7})
    assert again.json() == {"project": 7, "pushed": 0, "already": 1, "predictions": 0}
    assert len(fake.imported) == 1


async def test_the_public_url_setting_names_the_images(
    tmp_path: Path, settings_factory: Callable[..., Settings]
) -> None:
    settings = settings_factory(
        data_roots=[tmp_path / "data"], label_studio_public_url="https://orch.example/"
    )
    application = create_app(settings)
    async with serve(application) as client:
        datasets = application.state.services.datasets
        datasets.create("cars", "detect", ["car"])
        item = datasets.add("cars", jpeg(), ".jpg", [], source="model")
        fake = FakeLabelStudio()
        with_label_studio(application, fake)
        assert (await client.post("/v1/datasets/cars/push", json={"project": 7})).status_code == 200
    assert fake.imported[0]["data"]["img"].startswith(
        f"https://orch.example/v1/datasets/cars/items/{item}/image?key="
    )


async def test_without_label_studio_settings_a_sync_is_unavailable(
    app: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    _, client = app
    for route in ("push", "pull"):
        response = await client.post(f"/v1/datasets/cars/{route}", json={"project": 7})
        assert_problem(response, 409, "label_studio_not_configured")
    missing = await client.post("/v1/datasets/boats/push", json={"project": 7})
    assert_problem(missing, 404, "dataset_not_found")
    assert_problem(
        await client.post("/v1/datasets/cars/pull", json={"project": 0}), 422, "invalid_request"
    )


@pytest.mark.parametrize(
    ("handler", "status", "code"),
    [
        (
            lambda _: httpx.Response(404, json={"detail": "Not found."}),
            404,
            "label_studio_project_not_found",
        ),
        (lambda _: httpx.Response(500, text="boom"), 502, "label_studio_failed"),
        (lambda _: httpx.Response(401, json={"detail": "bad token"}), 502, "label_studio_failed"),
    ],
)
async def test_what_label_studio_refuses_is_a_problem_and_nothing_is_recorded(
    app: tuple[FastAPI, httpx.AsyncClient], handler: Handler, status: int, code: str
) -> None:
    application, client = app
    application.state.services.datasets.add("cars", jpeg(), ".jpg", [], source="model")
    with_label_studio(application, handler)
    assert_problem(await client.post("/v1/datasets/cars/push", json={"project": 7}), status, code)
    assert application.state.services.datasets.get("cars").labelling == {}


async def test_label_studio_out_of_reach_is_a_bad_gateway(
    app: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    application, client = app

    def unreachable(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with_label_studio(application, unreachable)
    body = assert_problem(
        await client.post("/v1/datasets/cars/pull", json={"project": 7}), 502, "label_studio_failed"
    )
    assert "ConnectError" in body["detail"]


async def test_a_sync_needs_models_write_or_labelling(
    tmp_path: Path, settings_factory: Callable[..., Settings]
) -> None:
    tokens = [
        {"sha256": hashlib.sha256(token.encode()).hexdigest(), "scope": token}
        for token in ("jobs", "labelling", "models:write")
    ]
    application = create_app(settings_factory(data_roots=[tmp_path / "data"], tokens=tokens))
    async with serve(application) as client:
        application.state.services.datasets.create("cars", "detect", ["car"])
        for token, status in (("jobs", 403), ("labelling", 409), ("models:write", 409)):
            response = await client.post(
                "/v1/datasets/cars/push",
                json={"project": 7},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert response.status_code == status, (token, response.text)
