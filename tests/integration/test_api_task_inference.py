"""Every task through the HTTP API on the CPU: import a model of each task, run inference, and get
the task's result shape; what a model's task cannot do is refused at submission, storing nothing."""

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
from yolo_orch.domain import NewModel, results
from yolo_orch.domain.results import InferenceResultDetail
from yolo_orch.ops.clock import utcnow
from yolo_orch.testing.yolo import (
    TASK_CONFIGS,
    build_task_checkpoint,
    ensure_ultralytics,
    make_images,
)

IMGSZ = 64


@pytest.fixture(scope="module")
def model_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    root = tmp_path_factory.mktemp("weights")
    for task in TASK_CONFIGS:
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
        yield http


async def _import(client: httpx.AsyncClient, task: str) -> dict[str, Any]:
    response = await client.post("/v1/models", json={"path": f"{task}.pt"})
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


async def _submit(client: httpx.AsyncClient, model: str, **params: Any) -> httpx.Response:
    job = {"kind": "inference", "model": model, "inputs": ["shots/*.jpg"], "params": params}
    return await client.post("/v1/jobs", json=job)


async def _job_count(client: httpx.AsyncClient) -> int:
    return len((await client.get("/v1/jobs")).json()["jobs"])


TASK_FIELDS = {
    "detect": {"detections"},
    "segment": {"detections"},
    "pose": {"detections"},
    "obb": {"detections"},
    "classify": {"classes"},
    "semantic": {"classes", "map"},
    "depth": {"depth", "map"},
}
DETECTION_FIELDS = {
    "detect": {"class_id", "class_name", "confidence", "box"},
    "segment": {"class_id", "class_name", "confidence", "box", "mask"},
    "pose": {"class_id", "class_name", "confidence", "box", "keypoints", "keypoint_names"},
    "obb": {"class_id", "class_name", "confidence", "obb"},
}
COUNTED = {
    "classify": "classified",
    "semantic": "maps",
    "depth": "maps",
}


@pytest.mark.parametrize("task", list(TASK_CONFIGS))
async def test_each_task_serves_its_result_shape(client: httpx.AsyncClient, task: str) -> None:
    model = await _import(client, task)
    assert model["task"] == task
    response = await _submit(client, task, imgsz=IMGSZ)
    assert response.status_code == 202, response.text
    job = await wait_terminal(client, response.json()["id"], deadline_s=60)
    assert job["state"] == "succeeded", job
    counted = COUNTED.get(task, "detections")
    assert set(job["result"]) == {
        "task",
        "images",
        counted,
        "failed_images",
        "format",
        "variant_id",
    }
    assert (job["result"]["task"], job["result"]["format"]) == (task, "pt")
    if counted != "detections":
        assert job["result"][counted] == 2

    result = (await client.get(f"/v1/jobs/{job['id']}/result")).json()
    described = InferenceResultDetail.model_validate(result)  # as the OpenAPI document says
    assert {type(image).__name__ for image in described.images} == {f"{task.capitalize()}Image"}
    artifacts = {
        a["name"] for a in (await client.get(f"/v1/jobs/{job['id']}/artifacts")).json()["artifacts"]
    }
    for image in result["images"]:
        assert set(image) == {"source", "width", "height", *TASK_FIELDS[task]}
        if task in DETECTION_FIELDS:
            assert image["detections"], "the biased head detects something"
            assert {frozenset(d) for d in image["detections"]} == {
                frozenset(DETECTION_FIELDS[task])
            }
        if "map" in image:
            assert image["map"] in artifacts


@pytest.mark.parametrize(
    ("task", "params", "named"),
    [
        ("detect", {"mask_format": "rle"}, "mask_format"),
        ("classify", {"conf": 0.5}, "conf"),
        ("segment", {"top_k": 3}, "top_k"),
        ("depth", {"classes": [0]}, "classes"),
    ],
)
async def test_params_the_models_task_has_no_use_for_are_refused_storing_nothing(
    client: httpx.AsyncClient, task: str, params: dict[str, Any], named: str
) -> None:
    await _import(client, task)
    before = await _job_count(client)

    response = await _submit(client, task, imgsz=IMGSZ, **params)

    assert_problem(response, 422, "task_mismatch")
    assert f"params.{named}" in response.json()["detail"]
    assert f"{task} models" in response.json()["detail"]
    assert await _job_count(client) == before


async def test_a_model_whose_task_this_server_cannot_run_is_refused_at_submission(
    client: httpx.AsyncClient,
) -> None:
    # A registration from before imports refused such tasks (the import refuses it now).
    services = client._transport.app.state.services  # type: ignore[attr-defined]
    await services.models._store.add(
        NewModel(
            name="old",
            sha256="0" * 64,
            size_bytes=1,
            task="regress",
            class_names=("a",),
            source="test",
            file_name="old.pt",
        ),
        utcnow(),
    )
    before = await _job_count(client)

    response = await _submit(client, "old", imgsz=IMGSZ)

    assert_problem(response, 422, "task_mismatch")
    assert "'regress'" in response.json()["detail"]
    assert await _job_count(client) == before


async def test_the_openapi_document_describes_each_tasks_result(
    client: httpx.AsyncClient,
) -> None:
    document = (await client.get("/openapi.json")).json()
    route = document["paths"]["/v1/jobs/{job_id}/result"]["get"]
    schema = route["responses"]["200"]["content"]["application/json"]["schema"]
    assert schema == {"$ref": "#/components/schemas/JobResultDetail"}
    schemas = document["components"]["schemas"]
    for name in (
        "DetectImage",
        "SegmentImage",
        "PoseImage",
        "ObbImage",
        "ClassifyImage",
        "SemanticImage",
        "DepthImage",
        "InferenceResultDetail",
    ):
        assert name in schemas, name
    examples = {
        name: schemas[name]["examples"]
        for name in vars(results)
        if name in schemas and name.endswith("Image") and name != "ImageError"
    }
    assert len(examples) == len(TASK_CONFIGS)
    for name, [example] in examples.items():  # each example is a valid entry
        getattr(results, name).model_validate(example)
    params = schemas["InferenceParams"]["properties"]
    assert params["mask_format"]["x-tasks"] == ["segment"]
    assert params["top_k"]["x-tasks"] == ["classify"]


async def test_an_upload_for_a_mismatched_task_is_refused_and_its_images_not_kept(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    await _import(client, "classify")
    image = (tmp_path / "data" / "shots" / "img0.jpg").read_bytes()

    response = await client.post(
        "/v1/jobs/inference",
        data={"model": "classify", "params": '{"max_det": 3}'},
        files=[("images", ("a.jpg", image, "image/jpeg"))],
    )

    assert_problem(response, 422, "task_mismatch")
    assert await _job_count(client) == 0
    assert list((tmp_path / "var" / "jobs").glob("*")) == []
