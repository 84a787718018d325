"""POST /v1/datasets/{name}/push and /pull: a managed dataset's items into a Label Studio
project as tasks with pre-annotations, and the project's annotations back into the dataset
(`labelling/ls_sync.py`; docs/label-studio.md). The server reaches Label Studio at
`label_studio_url` with `label_studio_token`; Label Studio's pages reach the pushed images at
`label_studio_public_url`, else at the URL this request came in on."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from pydantic import BaseModel, ConfigDict, Field

from yolo_orch.api.auth import labelling_write_scope
from yolo_orch.api.deps import ServicesDep
from yolo_orch.api.problems import problem_responses
from yolo_orch.domain.managed_datasets import DATASET_NAME_PATTERN
from yolo_orch.labelling.ls_sync import PushScope

router = APIRouter(prefix="/v1/datasets/{name}", tags=["datasets"])

DatasetName = Annotated[str, Path(description="The managed dataset.", pattern=DATASET_NAME_PATTERN)]
ProjectId = Annotated[int, Field(ge=1, le=2**31 - 1, description="The Label Studio project's id.")]
_SCOPE = "Needs `models:write`, `labelling` or `admin`."


class PushRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    project: ProjectId
    items: PushScope = Field(
        default="model",
        description="`model`: the items a model labelled (capture's), which a person has not "
        "checked; `all`: every item (a person's labels go as annotations). Items pushed to the "
        "project before are not sent again either way.",
    )


class PullRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    project: ProjectId


class Pushed(BaseModel):
    project: int
    pushed: int = Field(description="Tasks created in the project.")
    already: int = Field(description="Items pushed to the project before, not sent again.")
    predictions: int = Field(description="Of the tasks created, those with a pre-annotation.")


class Pulled(BaseModel):
    project: int
    annotated: int = Field(description="The project's tasks of this dataset with an annotation.")
    updated: int = Field(description="Items whose labels are now their latest annotation's.")
    unchanged: int = Field(description="Items that held those labels already.")
    missing: int = Field(description="Tasks whose item is no longer in the dataset.")
    other: int = Field(description="Tasks of the project that are not this dataset's items.")


@router.post(
    "/push",
    response_model=Pushed,
    summary="Push a dataset's items to a Label Studio project",
    description="Creates one task per item not pushed to the project before, its image this "
    "server's URL of the item, with the item's labels as a prediction (`model_version`: the "
    "model that made them). The project's labelling config must have a control for the "
    f"dataset's task (422 `label_config_invalid`). {_SCOPE}",
    responses=problem_responses(403, 404, 409, 422, 502),
    dependencies=[labelling_write_scope],
)
async def push(
    name: DatasetName, body: PushRequest, services: ServicesDep, request: Request
) -> Pushed:
    public_url = services.settings.label_studio_public_url or str(request.base_url)
    counts = await services.label_studio_sync.push(
        name, body.project, public_url=public_url, scope=body.items
    )
    return Pushed(project=body.project, **vars(counts))


@router.post(
    "/pull",
    response_model=Pulled,
    summary="Pull a Label Studio project's annotations into a dataset",
    description="For each of the project's tasks that is an item of this dataset and has an "
    "annotation that was not skipped, the item's labels become its latest annotation's (source "
    f"`annotation`). {_SCOPE}",
    responses=problem_responses(403, 404, 409, 422, 502),
    dependencies=[labelling_write_scope],
)
async def pull(name: DatasetName, body: PullRequest, services: ServicesDep) -> Pulled:
    counts = await services.label_studio_sync.pull(name, body.project)
    return Pulled(project=body.project, **vars(counts))
