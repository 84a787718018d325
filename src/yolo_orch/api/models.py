"""/v1/models: the weights registry. Weights come in only through an import that fingerprints
them and reads their metadata without running code from them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response, status
from pydantic import ValidationError
from starlette.datastructures import UploadFile

from yolo_orch.api.auth import admin_scope
from yolo_orch.api.deps import DiskSpace, ServicesDep
from yolo_orch.api.model_schemas import (
    DERIVED_NAME,
    ModelDetail,
    ModelImported,
    ModelImportFromPath,
    ModelList,
    ModelPublic,
    VariantImportFromPath,
    VariantPublic,
)
from yolo_orch.api.problems import problem_responses
from yolo_orch.domain import MODEL_NAME_MAX_LENGTH, MODEL_NAME_PATTERN, Model, model_name_from_file
from yolo_orch.domain.variants import Variant
from yolo_orch.errors import ErrorCode, InvalidJob, UnsupportedMediaType
from yolo_orch.registry.models import CHUNK_BYTES, refuse_exported_file

router = APIRouter(prefix="/v1/models", tags=["models"])

_LOCATION: dict[str, Any] = {
    "description": "`/v1/models/{id}`: the model, with its variants",
    "schema": {"type": "string"},
}

ModelRef = Annotated[
    str,
    Path(
        description="The model's id or name, or an alias (`name@alias`: the model it points to "
        "now).",
        max_length=264,
    ),
]
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
    response_model=ModelImported,
    status_code=status.HTTP_201_CREATED,
    summary="Import weights",
    description="Upload a `.pt` file (multipart, field `file`) or name one under a model root "
    "(JSON `{path, name}`). The file is fingerprinted (SHA-256) and loaded once with code "
    "execution off to read its task and class names. The same bytes imported again return the "
    "existing model (200), under its name: with another `name`, `name_applied` is false and "
    "`note` says so. A `path` import needs the server to have `model_roots` (422 "
    "`no_model_roots` otherwise), and the file must be under one of them. At most "
    "`max_concurrent_imports` imports of models and variants run at once; another is refused "
    "before its body is read (429 `imports_busy`, with `Retry-After`).",
    responses={
        200: {"model": ModelImported, "description": "Already registered"},
        201: {"description": "Imported", "headers": {"Location": _LOCATION}},
        **problem_responses(403, 409, 413, 415, 422, 429, 507),
    },
    openapi_extra=_IMPORT_BODY,
    dependencies=[admin_scope, DiskSpace],
)
async def import_model(
    request: Request, services: ServicesDep, response: Response
) -> ModelImported:
    async with services.models.imports.slot(services.settings.max_concurrent_imports):
        (model, created), asked = await _import_model(request, services)
    if created:
        response.headers["Location"] = f"/v1/models/{model.id}"
    else:
        response.status_code = status.HTTP_200_OK
    return ModelImported.of_import(model, asked)


async def _import_model(request: Request, services: ServicesDep) -> tuple[tuple[Model, bool], str]:
    """The model and whether it is new; the name it was to have."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "application/json":
        try:
            body = ModelImportFromPath.model_validate_json(await request.body())
        except ValidationError as exc:
            raise InvalidJob(_first_error(exc), code=ErrorCode.INVALID_REQUEST) from None
        asked = body.name or model_name_from_file(body.path)
        return await services.models.import_path(body.path, name=asked), asked
    if content_type == "multipart/form-data":
        return await _import_upload(request, services)
    raise UnsupportedMediaType(
        "send multipart/form-data (field `file`) or application/json (`path`)"
    )


@router.get("", response_model=ModelList, summary="List models, newest first")
async def list_models(services: ServicesDep) -> ModelList:
    return ModelList(models=[ModelPublic.of(m) for m in await services.models.list_models()])


@router.get(
    "/{ref}",
    response_model=ModelDetail,
    summary="Get a model, its variants and its aliases",
    description="`ref`: the model's id or name, or an alias (`name@alias`: the model it points "
    "to now).",
    responses=problem_responses(404),
)
async def get_model(ref: ModelRef, services: ServicesDep) -> ModelDetail:
    model = await services.models.get(ref)
    variants = await services.models.variants.list_for(model.id)
    aliases = await services.models.aliases.pointing_to(model.id)
    return ModelDetail(
        **ModelPublic.of(model).model_dump(),
        variants=[VariantPublic.of(v) for v in variants],
        aliases=[str(alias.ref) for alias in aliases],
    )


@router.delete(
    "/{ref}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete a model",
    description="Refused (409) while queued or running jobs use it, while aliases point to it "
    "(`model_has_aliases`), and while it has variants unless `cascade=true`, which deletes "
    "them with it.",
    responses=problem_responses(403, 404, 409),
    dependencies=[admin_scope],
)
async def delete_model(
    ref: ModelRef,
    services: ServicesDep,
    cascade: Annotated[bool, Query(description="Delete its variants too.")] = False,
) -> Response:
    await services.models.delete(ref, cascade=cascade)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


_VARIANT_IMPORT_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {"file": {"type": "string", "format": "binary"}},
                }
            },
            "application/json": {"schema": VariantImportFromPath.model_json_schema()},
        },
    }
}


@router.post(
    "/{ref}/variants",
    response_model=VariantPublic,
    status_code=status.HTTP_201_CREATED,
    summary="Import an exported variant",
    description="Upload an `.onnx` file or a `.zip` of an OpenVINO model (its `.xml`, the `.bin` "
    "of the same name and `metadata.yaml`, nothing else), or name either under a model root "
    "(JSON `{path}`). Loading these runs no code; TorchScript and TensorRT files do, and are "
    "refused (422 `format_not_importable`). An archive may unpack to 10 times its size plus 1 "
    "MiB (and `max_upload_bytes`); a file or folder named by path is checked for its files and "
    "`max_upload_bytes` before it is copied (422 `invalid_variant`). The task and class names "
    "in the file must be the model's, and the variant must reproduce the model's `.pt`: both "
    "run on a fixed probe at the variant's imgsz and their raw outputs must agree within the "
    "variant's precision's tolerance (422 `variant_mismatch`, giving the difference; nothing is "
    "stored). The same files again return the existing variant (200). At most "
    "`max_concurrent_imports` imports of models and variants run at once; another is refused "
    "before its body is read (429 `imports_busy`, with `Retry-After`).",
    responses={
        200: {"model": VariantPublic, "description": "Already registered"},
        201: {"description": "Imported", "headers": {"Location": _LOCATION}},
        **problem_responses(403, 404, 413, 415, 422, 429, 507),
    },
    openapi_extra=_VARIANT_IMPORT_BODY,
    dependencies=[admin_scope, DiskSpace],
)
async def import_variant(
    ref: ModelRef, request: Request, services: ServicesDep, response: Response
) -> VariantPublic:
    async with services.models.imports.slot(services.settings.max_concurrent_imports):
        variant, created = await _import_variant(ref, request, services)
    if created:
        response.headers["Location"] = f"/v1/models/{variant.model_id}"
    else:
        response.status_code = status.HTTP_200_OK
    return VariantPublic.of(variant)


async def _import_variant(
    ref: str, request: Request, services: ServicesDep
) -> tuple[Variant, bool]:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "application/json":
        try:
            body = VariantImportFromPath.model_validate_json(await request.body())
        except ValidationError as exc:
            raise InvalidJob(_first_error(exc), code=ErrorCode.INVALID_REQUEST) from None
        return await services.models.import_variant_path(
            ref, body.path, services.settings.max_upload_bytes
        )
    if content_type == "multipart/form-data":
        model = await services.models.get(ref)
        async with request.form(max_files=1, max_fields=2) as form:
            upload = form.get("file")
            if not isinstance(upload, UploadFile):
                raise InvalidJob(
                    "the multipart body needs a `file` part", code=ErrorCode.INVALID_REQUEST
                )
            return await services.models.variants.import_upload(
                model,
                _chunks(upload),
                upload.filename or "",
                services.settings.max_upload_bytes,
            )
    raise UnsupportedMediaType(
        "send multipart/form-data (field `file`) or application/json (`path`)"
    )


@router.delete(
    "/{ref}/variants/{variant_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete a variant",
    responses=problem_responses(403, 404),
    dependencies=[admin_scope],
)
async def delete_variant(
    ref: ModelRef,
    variant_id: Annotated[str, Path(max_length=200)],
    services: ServicesDep,
) -> Response:
    model = await services.models.get(ref)
    await services.models.variants.delete(model, variant_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


async def _import_upload(request: Request, services: ServicesDep) -> tuple[tuple[Model, bool], str]:
    async with request.form(max_files=1, max_fields=4) as form:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise InvalidJob(
                "the multipart body needs a `file` part", code=ErrorCode.INVALID_REQUEST
            )
        refuse_exported_file(upload.filename or "")
        raw_name = form.get("name")
        if isinstance(raw_name, str) and raw_name:
            try:
                ModelImportFromPath(path="-", name=raw_name)
            except ValidationError as exc:
                raise InvalidJob(_first_error(exc), code=ErrorCode.INVALID_REQUEST) from None
            name = raw_name
        else:
            name = model_name_from_file(upload.filename or "")
        imported = await services.models.import_stream(
            _chunks(upload),
            name=name,
            source="upload",
            max_bytes=services.settings.max_upload_bytes,
        )
        return imported, name


async def _chunks(upload: UploadFile) -> AsyncIterator[bytes]:
    while chunk := await upload.read(CHUNK_BYTES):
        yield chunk


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {error['msg']}" if where else str(error["msg"])
