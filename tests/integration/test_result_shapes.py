"""Every kind's full result (GET /v1/jobs/{id}/result) has the shape the OpenAPI document gives
it (`domain/results.py`); the real runners' results are checked against the same models in their
own tests (inference per task, validation per task)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from tests.conftest import sim_job, wait_terminal
from yolo_orch.domain.results import (
    ExportResultDetail,
    InferenceResultDetail,
    JobResultDetail,
    TrainingResultDetail,
    ValidationResultDetail,
)


@pytest.mark.parametrize(
    ("job", "shape"),
    [
        (sim_job(), InferenceResultDetail),
        (sim_job(kind="training", inputs=None), TrainingResultDetail),
        (sim_job(kind="validation", inputs=None), ValidationResultDetail),
        (sim_job(kind="export", inputs=None, params={"format": "onnx"}), ExportResultDetail),
    ],
    ids=["inference", "training", "validation", "export"],
)
async def test_each_kind_s_result_has_its_documented_shape(
    client: httpx.AsyncClient, job: dict[str, Any], shape: type[BaseModel]
) -> None:
    job = {key: value for key, value in job.items() if value is not None}
    submitted = await client.post("/v1/jobs", json=job)
    assert submitted.status_code == 202, submitted.text
    assert (await wait_terminal(client, submitted.json()["id"]))["state"] == "succeeded"

    result = (await client.get(f"/v1/jobs/{submitted.json()['id']}/result")).json()

    shape.model_validate(result)
    assert isinstance(JobResultDetail.model_validate(result).root, shape)


async def test_the_result_route_documents_every_kind(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    schemas = document["components"]["schemas"]
    names = {"InferenceResultDetail", "TrainingResultDetail", "ValidationResultDetail"}
    assert names | {"ExportResultDetail"} <= schemas.keys()
