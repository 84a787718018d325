"""/v1/datasets: the managed datasets that capture fills, Label Studio annotates and training jobs
read by name (`dataset: "dataset:<name>"`), with their counts per split and class, a zip of each,
and each item's image (what Label Studio shows of a task pushed to it). Reads need any token;
creating and deleting need `models:write` (or `admin`). docs/datasets.md says more."""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator
from typing import Annotated

import anyio
import anyio.to_thread
from fastapi import APIRouter, Path, Query, Response, status
from fastapi.responses import StreamingResponse

from yolo_orch.api.auth import models_write_scope
from yolo_orch.api.dataset_schemas import DatasetCreate, DatasetList, DatasetPublic
from yolo_orch.api.deps import DiskSpace, ServicesDep
from yolo_orch.api.file_responses import RANGE_RESPONSES, RangedFileResponse
from yolo_orch.api.job_images import IMAGE_TYPES
from yolo_orch.api.problems import problem_responses
from yolo_orch.domain.managed_datasets import (
    DATASET_NAME_MAX_LENGTH,
    DATASET_NAME_PATTERN,
    ITEM_ID_PATTERN,
)
from yolo_orch.errors import Forbidden
from yolo_orch.files.managed_dataset_zip import zip_chunks

router = APIRouter(prefix="/v1/datasets", tags=["datasets"])

# A name or id outside these patterns cannot exist: answered 404, like any other unknown one.
NameInPath = Annotated[str, Path(description="The dataset's name.", max_length=256)]
ItemInPath = Annotated[str, Path(description="The item's id.", max_length=64)]
_LOCATION = {"description": "The dataset's URL.", "schema": {"type": "string"}}
_NAMED = (
    f"A name is {DATASET_NAME_PATTERN} (up to {DATASET_NAME_MAX_LENGTH} characters); an item id "
    f"is {ITEM_ID_PATTERN}."
)


@router.get("", response_model=DatasetList, summary="List managed datasets, by name")
async def list_datasets(services: ServicesDep) -> DatasetList:
    found = await anyio.to_thread.run_sync(services.datasets.list, limiter=services.file_limiter)
    return DatasetList(datasets=[DatasetPublic.of(info) for info in found])


@router.post(
    "",
    response_model=DatasetPublic,
    status_code=status.HTTP_201_CREATED,
    summary="Create a managed dataset",
    description="An empty dataset of a task (`detect`, `segment`, `pose`, `obb`, `classify`) "
    "and its class names (pose: and its `kpt_shape`), in its folder under the server's "
    "`datasets_dir`. 409 `dataset_exists` if the name is taken. Class names that repeat, a "
    "`kpt_shape` for another task than pose or none for pose, and classify class names that "
    "are no folder names (a `/`, a `\\`, a leading `.`) are refused (422 `invalid_request`); "
    "more class names, or bytes of them, than the server keeps are refused (422 "
    "`class_names_too_large`). Capture and Label Studio fill it; a training job names it as "
    '`dataset: "dataset:<name>"`. Needs `models:write` (or `admin`).',
    responses={
        201: {"description": "Created", "headers": {"Location": _LOCATION}},
        **problem_responses(403, 409, 422, 507),
    },
    dependencies=[models_write_scope, DiskSpace],
)
async def create_dataset(
    body: DatasetCreate, services: ServicesDep, response: Response
) -> DatasetPublic:
    kpt_shape = None if body.kpt_shape is None else (body.kpt_shape[0], body.kpt_shape[1])
    info = await anyio.to_thread.run_sync(
        lambda: services.datasets.create(
            body.name, body.task, body.names, kpt_shape=kpt_shape, labelling=body.labelling
        ),
        limiter=services.file_limiter,
    )
    response.headers["Location"] = f"/v1/datasets/{info.name}"
    return DatasetPublic.of(info)


@router.get(
    "/{name}",
    response_model=DatasetPublic,
    summary="Get a managed dataset and its counts",
    description="Its task, class names, items per split with each class's objects (for "
    "classify: images), items by source (`model`: predicted; `annotation`: a person's) and "
    f"its `labelling`. 404 `dataset_not_found`. {_NAMED}",
    responses=problem_responses(404),
)
async def get_dataset(name: NameInPath, services: ServicesDep) -> DatasetPublic:
    info = await anyio.to_thread.run_sync(
        services.datasets.get, name, limiter=services.file_limiter
    )
    return DatasetPublic.of(info)


@router.delete(
    "/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete a managed dataset",
    description="The dataset and all its files, at once for every reader. A job running on "
    "it fails; a capture into it drops what it still had to write. Needs `models:write` (or "
    "`admin`).",
    responses=problem_responses(403, 404),
    dependencies=[models_write_scope],
)
async def delete_dataset(name: NameInPath, services: ServicesDep) -> Response:
    await anyio.to_thread.run_sync(services.datasets.delete, name, limiter=services.file_limiter)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get(
    "/{name}/zip",
    summary="Download a managed dataset as a zip",
    description="Its manifest, data.yaml, images, labels and item sidecars, under one folder "
    "named after it (its data.yaml says `path: .`: the unpacked folder trains as it is). Made "
    "while it is sent: items added meanwhile may be left out.",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"application/zip": {}}, "description": "The zip."},
        **problem_responses(404),
    },
)
async def download_zip(name: NameInPath, services: ServicesDep) -> StreamingResponse:
    limiter = services.file_limiter
    folder, files = await anyio.to_thread.run_sync(services.datasets.files, name, limiter=limiter)
    chunks = zip_chunks(folder, files, name)
    return StreamingResponse(
        _in_threads(chunks, limiter),
        media_type="application/zip",
        headers={"Content-Disposition": f'attachment; filename="{name}.zip"'},
    )


@router.get(
    "/{name}/items/{item}/image",
    summary="An item's image",
    description="What Label Studio shows of a task pushed to it. 404 `dataset_item_not_found`. "
    "`Range` requests are served (206, or 416 `range_not_satisfiable`). With `key` (the URLs "
    "a push gives Label Studio carry it), no token is needed: where tokens are configured, "
    "a wrong key is 403 `forbidden`.",
    response_class=RangedFileResponse,
    responses={**RANGE_RESPONSES, **problem_responses(403, 404)},
)
async def get_item_image(
    name: NameInPath,
    item: ItemInPath,
    services: ServicesDep,
    key: Annotated[
        str | None,
        Query(
            max_length=128,
            description="The dataset's image key, in place of a token (a browser's `<img>`, "
            "such as Label Studio's pages, sends none).",
        ),
    ] = None,
) -> RangedFileResponse:
    # Without tokens configured every route is open: a key has nothing to open.
    if (
        key is not None
        and services.settings.tokens
        and not await anyio.to_thread.run_sync(
            services.datasets.opens_images, name, key, limiter=services.file_limiter
        )
    ):
        raise Forbidden("the key does not open this dataset's images")
    path = await anyio.to_thread.run_sync(
        services.datasets.item_image, name, item, limiter=services.file_limiter
    )
    media_type = IMAGE_TYPES.get(path.suffix.lower(), "application/octet-stream")
    headers = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox"}
    return RangedFileResponse(path, media_type=media_type, headers=headers)


async def _in_threads(
    chunks: Generator[bytes, None, None], limiter: anyio.CapacityLimiter
) -> AsyncIterator[bytes]:
    """Each chunk made on a thread of the request-time file work, not on the event loop; the
    files it has open are closed when the client goes away."""
    try:
        while True:
            chunk = await anyio.to_thread.run_sync(next, chunks, None, limiter=limiter)
            if chunk is None:
                return
            if chunk:
                yield chunk
    finally:
        chunks.close()  # the thread's call is never abandoned: nothing runs it now
