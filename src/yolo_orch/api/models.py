"""/v1/models: the weights registry. Weights come in only through an import that fingerprints
them and reads their metadata without running code from them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response, status
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.datastructures import UploadFile

from yolo_orch.api.auth import admin_scope
from yolo_orch.api.deps import ServicesDep
from yolo_orch.api.problems import problem_responses
from yolo_orch.domain import MODEL_NAME_MAX_LENGTH, MODEL_NAME_PATTERN, Model, model_name_from_file
from yolo_orch.errors import InvalidJob, UnsupportedMediaType
from yolo_orch.models import CHUNK_BYTES, model_view

router = APIRouter(prefix="/v1/models", tags=["models"])

ModelRef = Annotated[str, Path(description="The model's id or name.", max_length=200)]
ModelName = Annotated[
    str, Field(min_length=1, max_length=MODEL_NAME_MAX_LENGTH, pattern=MODEL_NAME_PATTERN)
]
DERIVED_NAME = (
    "Default: the file's stem, each run of characters other than A-Z, a-z, 0-9, `.`, `_` and "
    "`-` made one `-`, cut to 200 characters, without leading or trailing `.` and `-` "
    '("model" if nothing is left).'
)


class ModelImportFromPath(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(
        min_length=1, max_length=4096, description="A .pt file, relative to a model root."
    )
    name: ModelName | None = Field(default=None, description=DERIVED_NAME)


class ModelPublic(BaseModel):
    id: str
    name: str
    sha256: str
    size_bytes: int
    task: str
    class_names: list[str]
    source: str
    created_at: datetime
    usable: bool

    @classmethod
    def of(cls, model: Model) -> ModelPublic:
        return cls.model_validate(model_view(model))


class ModelList(BaseModel):
    models: list[ModelPublic]


_IMPORT_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "name": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": MODEL_NAME_MAX_LENGTH,
                            "pattern": MODEL_NAME_PATTERN,
                            "description": DERIVED_NAME,
                        },
                    },
                }
            },
            "application/json": {"schema": ModelImportFromPath.model_json_schema()},
        },
    }
}


@router.post(
    "",
    response_model=ModelPublic,
    status_code=status.HTTP_201_CREATED,
    summary="Import weights",
    description="Upload a `.pt` file (multipart, field `file`) or name one under a model root "
    "(JSON `{path, name}`). The file is fingerprinted (SHA-256) and loaded once with code "
    "execution off to read its task and class names. The same bytes imported again return the "
    "existing model (200).",
    responses={
        200: {"model": ModelPublic, "description": "Already registered"},
        **problem_responses(409, 413, 415, 422),
    },
    openapi_extra=_IMPORT_BODY,
    dependencies=[admin_scope],
)
async def import_model(request: Request, services: ServicesDep, response: Response) -> ModelPublic:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "application/json":
        try:
            body = ModelImportFromPath.model_validate_json(await request.body())
        except ValidationError as exc:
            raise InvalidJob(_first_error(exc), code="invalid_request") from None
        model, created = await services.models.import_path(body.path, name=body.name)
    elif content_type == "multipart/form-data":
        model, created = await _import_upload(request, services)
    else:
        raise UnsupportedMediaType(
            "send multipart/form-data (field `file`) or application/json (`path`)"
        )
    if created:
        response.headers["Location"] = f"/v1/models/{model.id}"
    else:
        response.status_code = status.HTTP_200_OK
    return ModelPublic.of(model)


@router.get("", response_model=ModelList, summary="List models, newest first")
async def list_models(services: ServicesDep) -> ModelList:
    return ModelList(models=[ModelPublic.of(m) for m in await services.models.list_models()])


@router.get(
    "/{ref}", response_model=ModelPublic, summary="Get a model", responses=problem_responses(404)
)
async def get_model(ref: ModelRef, services: ServicesDep) -> ModelPublic:
    return ModelPublic.of(await services.models.get(ref))


@router.delete(
    "/{ref}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete a model",
    description="Refused (409) while queued or running jobs use it.",
    responses=problem_responses(404, 409),
    dependencies=[admin_scope],
)
async def delete_model(ref: ModelRef, services: ServicesDep) -> Response:
    await services.models.delete(ref)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


async def _import_upload(request: Request, services: ServicesDep) -> tuple[Model, bool]:
    async with request.form(max_files=1, max_fields=4) as form:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise InvalidJob("the multipart body needs a `file` part", code="invalid_request")
        raw_name = form.get("name")
        if isinstance(raw_name, str) and raw_name:
            try:
                ModelImportFromPath(path="-", name=raw_name)
            except ValidationError as exc:
                raise InvalidJob(_first_error(exc), code="invalid_request") from None
            name = raw_name
        else:
            name = model_name_from_file(upload.filename or "")
        return await services.models.import_stream(
            _chunks(upload),
            name=name,
            source="upload",
            max_bytes=services.settings.max_upload_bytes,
        )


async def _chunks(upload: UploadFile) -> AsyncIterator[bytes]:
    while chunk := await upload.read(CHUNK_BYTES):
        yield chunk


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {error['msg']}" if where else str(error["msg"])
