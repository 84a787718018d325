"""/ls/{dataset}: Label Studio's ML backend protocol for one managed dataset (connect a project
with the URL `http://<server>/ls/<dataset>`; docs/label-studio.md). The answers have the shapes
Label Studio reads (`{"results": [...]}`, `{"model_version": ...}`); errors are problem JSON,
whose status and `detail` Label Studio shows as the connection's error."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path
from pydantic import BaseModel, ConfigDict, Field

from yolo_orch.api.auth import labelling_scope
from yolo_orch.api.deps import ServicesDep
from yolo_orch.api.problems import problem_responses
from yolo_orch.domain.managed_datasets import DATASET_NAME_PATTERN
from yolo_orch.labelling.ls_backend import LabelStudioBackend
from yolo_orch.labelling.ls_config import parse_label_config

router = APIRouter(prefix="/ls/{dataset}", tags=["label studio"], dependencies=[labelling_scope])

Dataset = Annotated[
    str, Path(description="The managed dataset the project labels.", pattern=DATASET_NAME_PATTERN)
]
MAX_TASKS = 10_000
"""The most inputs of one inference job. Label Studio's Retrieve predictions sends the tasks
selected, all in one request."""


class _LabelStudioBody(BaseModel):
    # Label Studio sends more than is read here (`project`, `params`, ...), and may add more.
    model_config = ConfigDict(extra="allow")


class SetupRequest(_LabelStudioBody):
    schema_: str = Field(
        default="", alias="schema", max_length=256 * 1024, description="The labelling config."
    )


class ModelVersion(BaseModel):
    model_version: str = Field(description="The id of the model predictions run with now.")


class PredictRequest(_LabelStudioBody):
    tasks: list[dict[str, Any]] = Field(max_length=MAX_TASKS)
    label_config: str = Field(max_length=256 * 1024)


class TaskPrediction(BaseModel):
    result: list[dict[str, Any]]
    score: float | None
    model_version: str


class PredictResponse(BaseModel):
    results: list[TaskPrediction] = Field(description="One per task, in the tasks' order.")
    model_version: str | None


class Health(BaseModel):
    status: str = Field(examples=["UP"])
    model_class: str
    dataset: str


class Versions(BaseModel):
    versions: list[str]


class Training(BaseModel):
    job: str = Field(description="The chain's id: its training job's (GET /v1/chains/{id}).")


async def _backend(services: ServicesDep) -> LabelStudioBackend:
    return services.label_studio


Backend = Annotated[LabelStudioBackend, Depends(_backend)]


@router.get(
    "/health",
    response_model=Health,
    summary="Label Studio: is the backend up",
    responses=problem_responses(404),
)
async def health(dataset: Dataset, backend: Backend) -> Health:
    await backend.dataset(dataset)  # a URL naming no dataset fails the connection at once
    return Health(status="UP", model_class="yolo-orch", dataset=dataset)


@router.post(
    "/setup",
    response_model=ModelVersion,
    summary="Label Studio: connect a project",
    description="Checks the project's labelling config and answers the model version: the "
    "id of the model `labelling.model` names now.",
    responses=problem_responses(404, 409, 422),
)
async def setup(dataset: Dataset, body: SetupRequest, backend: Backend) -> ModelVersion:
    version = await backend.model_version(dataset)
    if body.schema_:
        parse_label_config(body.schema_)
    return ModelVersion(model_version=version)


@router.get(
    "/versions",
    response_model=Versions,
    summary="Label Studio: model versions",
    responses=problem_responses(404, 409),
)
async def versions(dataset: Dataset, backend: Backend) -> Versions:
    return Versions(versions=[await backend.model_version(dataset)])


@router.post(
    "/predict",
    response_model=PredictResponse,
    summary="Label Studio: pre-annotate tasks",
    description="One inference job for all the tasks (GET /v1/jobs shows it); each task gets "
    "the results its labelling config can show. A task whose image cannot be read gets an "
    "empty result.",
    responses=problem_responses(404, 409, 422, 502),
)
async def predict(dataset: Dataset, body: PredictRequest, backend: Backend) -> PredictResponse:
    results = await backend.predict(dataset, body.tasks, body.label_config)
    version = results[0]["model_version"] if results else None
    return PredictResponse(
        results=[TaskPrediction.model_validate(each) for each in results], model_version=version
    )


@router.post(
    "/webhook",
    summary="Label Studio: an event of the project",
    description="ANNOTATION_CREATED, ANNOTATIONS_CREATED and ANNOTATION_UPDATED set the "
    "labels of the task's item; ANNOTATIONS_DELETED makes them a model's again; START_TRAINING "
    "starts a training chain. Other actions are ignored.",
    responses=problem_responses(404, 409, 422),
)
async def webhook(
    dataset: Dataset, backend: Backend, payload: Annotated[dict[str, Any], Body()]
) -> dict[str, Any]:
    return await backend.webhook(dataset, payload)


@router.post(
    "/train",
    response_model=Training,
    status_code=201,
    summary="Label Studio: train",
    description="Starts a training chain on the dataset (train, validate, promote the "
    "labelling alias if the gate passes), or answers the one under way. The body (Label "
    "Studio's annotations, for older releases) is not read: the annotations are in the "
    "dataset already.",
    responses=problem_responses(404, 409, 422),
)
async def train(dataset: Dataset, backend: Backend) -> Training:
    return Training(job=(await backend.train(dataset)).id)
