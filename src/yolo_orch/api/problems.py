"""RFC 9457 problem details for every error, with a machine `code`. The only place that maps
errors to HTTP status codes."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from yolo_orch import errors
from yolo_orch.api.connections import PROBE_PATHS
from yolo_orch.errors import ErrorCode
from yolo_orch.runners.failures import disk_full

log = logging.getLogger(__name__)

PROBLEM_MEDIA_TYPE = "application/problem+json"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""The methods that change nothing (RFC 9110 section 9.2.1)."""

_STATUS: dict[type[errors.YoloOrchError], int] = {
    errors.Unauthorized: 401,
    errors.Forbidden: 403,
    errors.JobNotFound: 404,
    errors.ModelNotFound: 404,
    errors.ArtifactNotFound: 404,
    errors.UploadNotFound: 404,
    errors.FramesNotFound: 404,
    errors.SnapshotNotFound: 404,
    errors.NotAStream: 422,
    errors.InvalidJob: 422,
    errors.InvalidCursor: 422,
    errors.InvalidWeights: 422,
    errors.PathOutsideRoots: 422,
    errors.InvalidPath: 422,
    errors.InputWalkTooLarge: 422,
    errors.ModelNameTaken: 409,
    errors.ModelInUse: 409,
    errors.ModelHasVariants: 409,
    errors.ModelHasAliases: 409,
    errors.AliasNotFound: 404,
    errors.AliasMoved: 409,
    errors.AliasHasNoPrevious: 409,
    errors.AliasTaskMismatch: 409,
    errors.VariantNotFound: 404,
    errors.DatasetNotFound: 404,
    errors.DatasetExists: 409,
    errors.DatasetItemNotFound: 404,
    errors.InvalidDatasetItem: 422,
    errors.ExportDependencyMissing: 422,
    errors.ModelUnusable: 409,
    errors.ModelTampered: 409,
    errors.IdempotencyKeyReused: 422,
    errors.JobAlreadyFinished: 409,
    errors.DependencyNotFound: 422,
    errors.DependencyFailed: 422,
    errors.ResultNotReady: 409,
    errors.NoResult: 409,
    errors.QueueFull: 429,
    errors.ImportsBusy: 429,
    errors.BodyTooLarge: 413,
    errors.UnsupportedMediaType: 415,
    errors.RangeNotSatisfiable: 416,
    errors.ShuttingDown: 503,
    errors.NotActiveHead: 503,
    errors.JobActive: 409,
    errors.InsufficientStorage: 507,
    errors.LabelStudioNotConfigured: 409,
    errors.LabelStudioProjectNotFound: 404,
    errors.LabelStudioFailed: 502,
    errors.LabelConfigInvalid: 422,
    errors.LabellingNotSet: 409,
    errors.PredictionFailed: 502,
    errors.TaskImageUnavailable: 422,
}


class Problem(BaseModel):
    type: str = Field(examples=["urn:yolo-orch:problem:job_not_found"])
    title: str
    status: int
    detail: str
    code: str = Field(description="Stable machine-readable reason.")


class ValidationProblem(Problem):
    errors: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Each invalid field (`loc`, `msg`, `type`) when the request failed validation.",
    )


def problem_body(status: int, code: ErrorCode, detail: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": f"urn:yolo-orch:problem:{code}",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "code": code,
        **extra,
    }


def problem_response(
    status: int, code: ErrorCode, detail: str, headers: dict[str, str] | None = None, **extra: Any
) -> JSONResponse:
    body = problem_body(status, code, detail, **extra)
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_MEDIA_TYPE)


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The error statuses a route documents; `install_problem_openapi` gives each the problem
    shape."""
    return {status: {"description": HTTPStatus(status).phrase} for status in statuses}


def install_problem_openapi(app: FastAPI, needs_token: Callable[[str], bool] | None = None) -> None:
    """Document every error answer as what it is: problem JSON (FastAPI documents 422 as its
    own `HTTPValidationError`), with the headers sent with it; 413 wherever a body is read.
    With `needs_token` (tokens are configured), the paths it names require the `bearer`
    security scheme (401); without, nothing answers 401 or the 403 of the admin routes."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = _with_problems(
                get_openapi(
                    title=app.title,
                    version=app.version,
                    summary=app.summary,
                    routes=app.routes,
                )
            )
            app.openapi_schema = _with_http_layer(
                _without_scopes(spec) if needs_token is None else _with_bearer(spec, needs_token)
            )
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _with_problems(spec: dict[str, Any]) -> dict[str, Any]:
    schemas = spec.setdefault("components", {}).setdefault("schemas", {})
    for model in (Problem, ValidationProblem):
        schemas[model.__name__] = model.model_json_schema(
            ref_template="#/components/schemas/{model}"
        )
    for operations in spec["paths"].values():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            if "requestBody" in operation:
                responses.setdefault("413", {"description": "Content Too Large"})
            for status, response in responses.items():
                if status.isdigit() and int(status) >= 400 and _problem_shaped(response):
                    name = "ValidationProblem" if status == "422" else "Problem"
                    response["content"] = {
                        PROBLEM_MEDIA_TYPE: {"schema": {"$ref": f"#/components/schemas/{name}"}}
                    }
                    if status in _ERROR_HEADERS:
                        response["headers"] = _ERROR_HEADERS[status]
    text = json.dumps(spec)  # what is still referenced after the rewrite
    for unused in ("HTTPValidationError", "ValidationError"):
        if f"#/components/schemas/{unused}" not in text:
            schemas.pop(unused, None)
    return spec


def _with_http_layer(spec: dict[str, Any]) -> dict[str, Any]:
    """The answers given before any route runs: a body that stalls (408), a name that is not the
    server's (421: the probes answer any), a change asked for by another site's page (403), no
    connection to spare (503)."""
    problem = {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}}
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            answers = {"503": "Service Unavailable"}
            if "requestBody" in operation:
                answers["408"] = "Request Timeout"
            if path not in PROBE_PATHS:
                answers["421"] = "Misdirected Request"
            if method.upper() not in SAFE_METHODS:
                answers["403"] = "Forbidden"
            responses = operation.setdefault("responses", {})
            for status, description in answers.items():
                answer = {"description": description, "content": problem}
                if status in _ERROR_HEADERS:
                    answer["headers"] = _ERROR_HEADERS[status]
                responses.setdefault(status, answer)
    return spec


_RETRY_AFTER = {
    "description": "Seconds to wait before trying again.",
    "schema": {"type": "integer", "minimum": 1},
}
_ERROR_HEADERS: dict[str, dict[str, Any]] = {
    "401": {"WWW-Authenticate": {"description": "`Bearer`", "schema": {"type": "string"}}},
    "429": {"Retry-After": _RETRY_AFTER},
    "503": {"Retry-After": _RETRY_AFTER},
}
"""The headers `error_response` sends with these statuses."""


def _without_scopes(spec: dict[str, Any]) -> dict[str, Any]:
    for operations in spec["paths"].values():
        for operation in operations.values():
            operation.get("responses", {}).pop("403", None)
    return spec


def _with_bearer(spec: dict[str, Any], needs_token: Callable[[str], bool]) -> dict[str, Any]:
    schemes = spec.setdefault("components", {}).setdefault("securitySchemes", {})
    schemes["bearer"] = {
        "type": "http",
        "scheme": "bearer",
        "description": "A token from `yolo-orch token create`; its scope (`jobs` or `admin`) "
        "decides what it may do.",
    }
    problem = {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}}
    unauthorized = {"description": "Unauthorized", "content": problem}
    unauthorized["headers"] = _ERROR_HEADERS["401"]
    for path, operations in spec["paths"].items():
        if needs_token(path):
            for operation in operations.values():
                operation["security"] = [{"bearer": []}]
                operation.setdefault("responses", {}).setdefault("401", unauthorized)
    return spec


async def _app_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, errors.YoloOrchError)
    return error_response(exc)


def error_response(exc: errors.YoloOrchError) -> JSONResponse:
    """The answer to an error: also sent by the middlewares that answer before the app runs."""
    status = next((s for cls, s in _STATUS.items() if isinstance(exc, cls)), 400)
    headers = None
    if isinstance(exc, errors.QueueFull | errors.ImportsBusy):
        headers = {"Retry-After": str(exc.retry_after_s)}
    elif isinstance(exc, errors.Unauthorized):
        headers = {"WWW-Authenticate": "Bearer"}
    elif isinstance(exc, errors.RangeNotSatisfiable):
        headers = {"Content-Range": f"bytes */{exc.size}"}
    elif isinstance(exc, errors.ShuttingDown):
        headers = {"Retry-After": "5", "Connection": "close"}
    elif isinstance(exc, errors.NotActiveHead):
        headers = {"Retry-After": "1"}
    return problem_response(status, exc.code, exc.message, headers)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    details = [
        {"loc": list(err.get("loc", ())), "msg": str(err.get("msg")), "type": err.get("type")}
        for err in exc.errors()
    ]
    first = exc.errors()[0] if exc.errors() else {}
    where = ".".join(str(part) for part in first.get("loc", ()))
    message = str(first.get("msg", "invalid request"))
    return problem_response(
        422, ErrorCode.INVALID_REQUEST, f"{where}: {message}" if where else message, errors=details
    )


_HTTP_CODES = {
    401: ErrorCode.UNAUTHORIZED,
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.METHOD_NOT_ALLOWED,
    408: ErrorCode.REQUEST_TIMEOUT,
    413: ErrorCode.BODY_TOO_LARGE,
}
"""The statuses `HTTPException` is raised with: by Starlette and FastAPI, and by `BodyLimits`
(408, 413) while a body is read; 400 is answered above."""


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    status = exc.status_code
    detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(status).phrase
    headers = dict(exc.headers or {})
    if status == 400:  # FastAPI's answer to a body it cannot decode: a bad request body
        return problem_response(
            422, ErrorCode.INVALID_REQUEST, f"the request body is unreadable: {detail}"
        )
    if status == 404 and detail == "Not Found":
        detail = f"no route for {request.method} {request.url.path}"
    if status == 405:  # Starlette names the first matching route's methods only
        headers["Allow"] = ", ".join(_allowed_methods(request))
    fallback = ErrorCode.INVALID_REQUEST if status < 500 else ErrorCode.INTERNAL_ERROR
    return problem_response(status, _HTTP_CODES.get(status, fallback), detail, headers)


def _problem_shaped(response: dict[str, Any]) -> bool:
    """An error answer the app sends as problem JSON: all but those declared with their own
    model (readiness answers 503 with its checks)."""
    schemas = [media.get("schema", {}) for media in response.get("content", {}).values()]
    return all(
        not schema or schema.get("$ref", "").endswith("/HTTPValidationError") for schema in schemas
    )


def _allowed_methods(request: Request) -> list[str]:
    """Every method some route serves at this path, read from the API's own description."""
    path = request.url.path
    paths: dict[str, dict[str, Any]] = request.app.openapi()["paths"]
    methods: set[str] = set()
    if path in paths:  # a literal path (/v1/jobs/inference) outranks a template that matches it
        methods = {method.upper() for method in paths[path]}
    else:
        for template, operations in paths.items():
            literal = (re.escape(part) for part in re.split(r"\{[^/}]+\}", template))
            if re.fullmatch("[^/]+".join(literal), path):
                methods |= {method.upper() for method in operations}
    if "GET" in methods:
        methods.add("HEAD")  # answered by `HeadAsGet`, and so not in the document
    return sorted(methods)


async def _os_error(request: Request, exc: Exception) -> JSONResponse:
    """ENOSPC: the disk filled since the guard looked (a request removes what it staged when
    it fails); any other OSError is a bug as other exceptions are."""
    if disk_full(exc):
        log.warning("disk full during %s %s: %s", request.method, request.url.path, exc)
        return error_response(errors.InsufficientStorage(["storing the request"], full=True))
    return await _unexpected_error(request, exc)


async def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return problem_response(
        500, ErrorCode.INTERNAL_ERROR, "the server failed to handle this request"
    )


async def _client_gone(request: Request, exc: Exception) -> JSONResponse:
    """The client closed the connection while its body was read: nothing of it was kept, and
    nobody reads the answer; not a server error."""
    log.info("the client went away during %s %s", request.method, request.url.path)
    return problem_response(400, ErrorCode.CLIENT_DISCONNECTED, "the request body ended early")


def install_problem_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ClientDisconnect, _client_gone)
    app.add_exception_handler(errors.YoloOrchError, _app_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(OSError, _os_error)
    app.add_exception_handler(Exception, _unexpected_error)
