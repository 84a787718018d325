"""Downloads of the registry's files: a model's `.pt` and a variant's file (an OpenVINO
variant's folder as a zip), so that what was exported here can be deployed elsewhere.

Every token may read them, as it may read the models. Each file is checked against its
fingerprint before it is served (`downloads`): one that changed is refused (409
`model_tampered`) and marked as a job that loads it would mark it (the model unusable, the
variant retired)."""

from __future__ import annotations

import pathlib
from typing import Annotated, Any
from urllib.parse import quote

import anyio.to_thread
from fastapi import APIRouter, Path, Request, Response

from yolo_orch.api.deps import ServicesDep
from yolo_orch.api.file_responses import RANGE_RESPONSES, RangedFileResponse
from yolo_orch.api.problems import problem_responses
from yolo_orch.domain import Job, Model
from yolo_orch.domain.variants import ExportFormat, Variant
from yolo_orch.errors import ModelNotFound, ModelTampered, VariantNotFound, VariantTampered
from yolo_orch.registry.downloads import download_name, openvino_zip, verify_file
from yolo_orch.registry.manifests import verify_tree
from yolo_orch.registry.variant_imports import entry_of

router = APIRouter(prefix="/v1/models", tags=["models"])

ModelRef = Annotated[str, Path(description="The model's id or name.", max_length=200)]
VariantId = Annotated[str, Path(max_length=200)]

_OCTETS = "application/octet-stream"
_BINARY = {"schema": {"type": "string", "format": "binary"}}
_HEADERS: dict[str, Any] = {
    "ETag": {
        "description": "The SHA-256 served, quoted: the `.pt`'s `sha256`, a variant's `sha256` "
        "(its manifest's digest), or the zip's own SHA-256.",
        "schema": {"type": "string"},
    },
    "Content-Disposition": {
        "description": "`attachment; filename=...`: `<model>.pt`, `<model>-<format>.onnx` (also "
        "`.torchscript`, `.engine`), `<model>_openvino_model.zip`.",
        "schema": {"type": "string"},
    },
}
_NOT_MODIFIED: dict[int | str, dict[str, Any]] = {
    304: {
        "description": "Not Modified: `If-None-Match` names the ETag (or `*`); no body.",
        "headers": {"ETag": _HEADERS["ETag"]},
    }
}
_DOWNLOAD = (
    "Checked against its fingerprint first: a file that changed since it was registered is "
    "refused (409 `model_tampered`) and, as a job loading it would, marks the model unusable or "
    "retires the variant. `ETag` is the SHA-256 served; `If-None-Match` with it answers 304. "
    "`Range` requests are served (206, or 416 `range_not_satisfiable`)."
)


@router.get(
    "/{ref}/file",
    summary="Download a model's .pt",
    description=f"The weights file, as imported or produced by training. {_DOWNLOAD}",
    response_class=RangedFileResponse,
    responses={
        200: {"content": {_OCTETS: _BINARY}, "headers": _HEADERS},
        **_NOT_MODIFIED,
        **RANGE_RESPONSES,
        **problem_responses(404, 409),
    },
)
async def download_model(ref: ModelRef, request: Request, services: ServicesDep) -> Response:
    model = await services.models.get(ref)
    path = services.models.path_of(model)
    try:
        await anyio.to_thread.run_sync(
            verify_file, path, model.sha256, limiter=services.file_limiter
        )
    except ModelTampered:
        await services.models.mark_unusable(model.id)
        raise
    return _served(request, path, model.sha256, download_name(model.name))


@router.get(
    "/{ref}/variants/{variant_id}/file",
    summary="Download a variant",
    description="An ONNX, TorchScript or TensorRT variant's file; an OpenVINO variant's folder "
    "as a zip (`model_openvino_model/` with its `.xml`, `.bin` and `metadata.yaml`: what "
    "ultralytics loads once unzipped, and what `POST /v1/models/{ref}/variants` imports). The "
    "zip is built on the first download, stored uncompressed, and kept until the variant is "
    f"deleted. {_DOWNLOAD}",
    response_class=RangedFileResponse,
    responses={
        200: {
            "content": {_OCTETS: _BINARY, "application/zip": _BINARY},
            "headers": _HEADERS,
        },
        **_NOT_MODIFIED,
        **RANGE_RESPONSES,
        **problem_responses(404, 409),
    },
)
async def download_variant(
    ref: ModelRef, variant_id: VariantId, request: Request, services: ServicesDep
) -> Response:
    model = await services.models.get(ref)
    variant = await _variant_of(services, model, variant_id)
    variants = services.models.variants
    folder = variants.folder_of(variant)
    try:
        if variant.format is ExportFormat.OPENVINO:
            path, etag = await anyio.to_thread.run_sync(
                openvino_zip, folder, variant, variants.downloads_dir, limiter=services.file_limiter
            )
        else:
            path, etag = entry_of(folder, variant.format), variant.sha256
            await anyio.to_thread.run_sync(
                verify_tree, folder, variant.files, variant.sha256, limiter=services.file_limiter
            )
    except ModelTampered as e:
        tampered = VariantTampered(variant.id, e)
        reason = f"its files no longer match their fingerprints: {tampered.message}"
        await variants.mark_unusable(variant.id, reason)
        raise tampered from None
    media_type = "application/zip" if variant.format is ExportFormat.OPENVINO else _OCTETS
    return _served(request, path, etag, download_name(model.name, variant), media_type)


async def job_variant_files(services: ServicesDep, job: Job) -> list[tuple[str, int, str]]:
    """The variants a job made (an export, or a training with `params.export`) that are still
    registered, as artifacts: each one's download name, size and URL (its download route, not
    a copy of its files among the job's). An OpenVINO variant's size is that of its files: its
    zip is a little larger."""
    summary = job.result or {}
    made = summary.get("variant_ids") or [summary.get("variant_id")]
    model_id = summary.get("model_id")
    if not isinstance(model_id, str) or not any(isinstance(v, str) for v in made):
        return []
    try:
        model = await services.models.get(model_id)
    except ModelNotFound:  # deleted since, with its variants
        return []
    found = {v.id: v for v in await services.models.variants.list_for(model.id)}
    return [
        (download_name(model.name, variant), variant.size_bytes, variant_file_url(variant))
        for variant in (found.get(v) for v in made if isinstance(v, str))
        if variant is not None
    ]


def variant_file_url(variant: Variant) -> str:
    return (
        f"/v1/models/{quote(variant.model_id, safe='')}/variants/{quote(variant.id, safe='')}/file"
    )


async def _variant_of(services: ServicesDep, model: Model, variant_id: str) -> Variant:
    for variant in await services.models.variants.list_for(model.id):
        if variant.id == variant_id:
            return variant
    raise VariantNotFound(variant_id)


def _served(
    request: Request,
    path: pathlib.Path,
    sha256: str,
    filename: str,
    media_type: str = _OCTETS,
) -> Response:
    etag = f'"{sha256}"'
    if etag_matches(request.headers.get("if-none-match"), etag):
        return Response(status_code=304, headers={"etag": etag})
    return RangedFileResponse(
        path, media_type=media_type, filename=filename, headers={"etag": etag}
    )


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    """`If-None-Match` by the weak comparison RFC 9110 §13.1.2 asks for: `W/` is ignored."""
    if if_none_match is None:
        return False
    tags = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
    return "*" in tags or etag in tags
