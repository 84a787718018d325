"""Limits at the API: cursors in range, image headers checked on upload, results paged from
disk and bounded per job."""

from __future__ import annotations

import base64
import io
import json
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image

from tests.conftest import serve, sim_job, wait_terminal
from tests.hostile import png_bomb
from tests.support.problems import assert_problem
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.errors import InvalidJob
from yolo_orch.files.class_names import ClassNameLimits
from yolo_orch.registry.models import ModelRegistry
from yolo_orch.registry.weights import CheckpointInfo
from yolo_orch.runners.variant_check import check_on_cpu
from yolo_orch.store.memory_models import InMemoryModelStore


def cursor(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize("seq", [str(2**63), "9" * 30, "1" * 20])
async def test_a_cursor_past_64_bits_is_invalid(client: httpx.AsyncClient, seq: str) -> None:
    response = await client.get("/v1/jobs", params={"cursor": cursor(f"seq:{seq}")})

    assert_problem(response, 422, "invalid_cursor")


async def test_the_largest_cursor_lists_from_the_newest(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/jobs", params={"cursor": cursor(f"seq:{2**63 - 1}")})

    assert response.status_code == 200, response.text


async def test_an_upload_over_max_image_pixels_is_refused_and_stores_nothing(
    settings_factory: Callable[..., Settings], tmp_path: Path
) -> None:
    settings = settings_factory()
    bomb = png_bomb(tmp_path / "bomb.png", 30_000, 30_000).read_bytes()
    ok = io.BytesIO()
    Image.new("RGB", (64, 48)).save(ok, format="PNG")
    async with serve(create_app(settings)) as client:
        response = await client.post(
            "/v1/jobs/inference",
            data={"model": "sim"},
            files=[
                ("images", ("fine.png", ok.getvalue(), "image/png")),
                ("images", ("bomb.png", bomb, "image/png")),
            ],
        )

        body = assert_problem(response, 422, "image_too_large")
        assert "'bomb.png'" in body["detail"]
        assert "max_image_pixels" in body["detail"]
        assert (await client.get("/v1/jobs")).json()["jobs"] == []
    assert list(settings.jobs_dir.glob("*/inputs")) == []


async def test_an_upload_whose_header_cannot_be_read_is_accepted(client: httpx.AsyncClient) -> None:
    image = ("images", ("odd.jpg", b"not an image", "image/jpeg"))

    response = await client.post("/v1/jobs/inference", data={"model": "sim"}, files=[image])

    assert response.status_code == 202, response.text


async def test_a_result_is_served_whole_or_in_pages(client: httpx.AsyncClient) -> None:
    inputs = [f"img-{i}.jpg" for i in range(5)]
    job = (await client.post("/v1/jobs", json=sim_job(inputs=inputs))).json()
    assert (await wait_terminal(client, job["id"]))["state"] == "succeeded"
    url = f"/v1/jobs/{job['id']}/result"

    whole = await client.get(url)
    assert whole.headers["content-type"] == "application/json"
    images = whole.json()["images"]
    assert [image["source"] for image in images] == inputs

    pages, offset = [], 0
    while offset is not None:
        page = (await client.get(url, params={"offset": offset, "limit": 2})).json()
        assert (page["total"], page["limit"], page["offset"]) == (5, 2, offset)
        pages.append(page["images"])
        offset = page["next_offset"]
    assert [len(page) for page in pages] == [2, 2, 1]
    assert [image for page in pages for image in page] == images

    first = (await client.get(url, params={"limit": 1})).json()
    assert (first["images"], first["next_offset"]) == (images[:1], 1)
    rest = (await client.get(url, params={"offset": 3})).json()
    assert (rest["images"], rest["limit"], rest["next_offset"]) == (images[3:], 100, None)
    assert_problem(await client.get(url, params={"limit": 0}), 422, "invalid_request")
    assert_problem(await client.get(url, params={"limit": 1001}), 422, "invalid_request")


async def test_a_training_result_pages_as_empty_and_is_whole_without_paging(
    client: httpx.AsyncClient,
) -> None:
    body = {"kind": "training", "model": "sim", "params": {"sim_seconds": 0.05}}
    job = (await client.post("/v1/jobs", json=body)).json()
    assert (await wait_terminal(client, job["id"]))["state"] == "succeeded"
    url = f"/v1/jobs/{job['id']}/result"

    assert set((await client.get(url)).json()) >= {"epochs", "metrics", "model"}
    page = (await client.get(url, params={"offset": 0})).json()
    assert (page["images"], page["total"], page["next_offset"]) == ([], 0, None)


async def test_a_job_whose_result_passes_max_result_bytes_fails_with_a_code(
    settings_factory: Callable[..., Settings],
) -> None:
    inputs = [f"{i:03d}-{'x' * 400}.jpg" for i in range(4)]  # about 1.8 KB of results
    async with serve(create_app(settings_factory(max_result_bytes=1024))) as client:
        job = (await client.post("/v1/jobs", json=sim_job(inputs=inputs))).json()
        done = await wait_terminal(client, job["id"])
        small = (await client.post("/v1/jobs", json=sim_job())).json()
        assert (await wait_terminal(client, small["id"]))["state"] == "succeeded"

    assert done["state"] == "failed"
    assert done["error"]["code"] == "result_too_large"
    assert "max_result_bytes" in done["error"]["message"]


@pytest.mark.parametrize(
    ("names", "limits"),
    [
        (("a", "b", "c"), ClassNameLimits(max_names=2)),
        (("a" * 100, "b" * 100), ClassNameLimits(max_bytes=199)),
    ],
)
async def test_an_import_with_class_names_past_the_limits_is_refused(
    tmp_path: Path, names: tuple[str, ...], limits: ClassNameLimits
) -> None:
    def inspect(path: Path) -> CheckpointInfo:
        return CheckpointInfo("detect", names, architecture=None, ultralytics_version=None)

    async def upload() -> AsyncIterator[bytes]:
        yield b"weights"

    store = InMemoryModelStore()
    registry = ModelRegistry(
        store, tmp_path / "models", [], inspect, limits, check_variant=check_on_cpu(tmp_path)
    )

    with pytest.raises(InvalidJob) as caught:
        await registry.import_stream(upload(), name="many", source="upload", max_bytes=1 << 20)

    assert caught.value.code == "class_names_too_large"
    assert "'many'" not in caught.value.message
    assert caught.value.message.startswith("many")
    assert await store.list_models() == []
    assert list((tmp_path / "models").iterdir()) == []


async def test_max_det_is_capped_at_1000(client: httpx.AsyncClient) -> None:
    too_many = await client.post("/v1/jobs", json=sim_job(params={"max_det": 1001}))

    assert_problem(too_many, 422, "invalid_request")
    most = await client.post("/v1/jobs", json=sim_job(params={"max_det": 1000}))
    assert most.status_code == 202


async def test_a_client_gone_mid_upload_is_no_server_error_and_leaves_nothing(
    settings_factory: Callable[..., Settings], caplog: pytest.LogCaptureFixture
) -> None:
    settings = settings_factory()
    app = create_app(settings)
    boundary = "b0undary"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\nsim\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="images"; filename="a.jpg"\r\n'
        "Content-Type: image/jpeg\r\n\r\n"
    ).encode() + b"\xff" * 1000
    messages = iter(
        [
            {"type": "http.request", "body": head, "more_body": True},
            {"type": "http.disconnect"},
        ]
    )
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return next(messages)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/jobs/inference",
        "raw_path": b"/v1/jobs/inference",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"localhost"),
            (b"content-type", f"multipart/form-data; boundary={boundary}".encode()),
            (b"content-length", b"100000"),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("test", 80),
    }
    async with serve(app) as client:
        with caplog.at_level(logging.INFO):
            await app(scope, receive, send)

        assert sent[0]["status"] == 400
        assert json.loads(sent[1]["body"])["code"] == "client_disconnected"
        assert not [record for record in caplog.records if record.levelno >= logging.ERROR]
        assert (await client.get("/v1/jobs")).json()["jobs"] == []
    assert list(settings.jobs_dir.glob("*")) == []
