"""RFC 9457 problem details for every error, with a machine `code`. The only place that maps
errors to HTTP status codes."""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from yolo_orch import errors

log = logging.getLogger(__name__)

PROBLEM_MEDIA_TYPE = "application/problem+json"

_STATUS: dict[type[errors.YoloOrchError], int] = {
    errors.Unauthorized: 401,
    errors.Forbidden: 403,
    errors.JobNotFound: 404,
    errors.ModelNotFound: 404,
    errors.ArtifactNotFound: 404,
    errors.InvalidJob: 422,
    errors.InvalidCursor: 422,
    errors.InvalidWeights: 422,
    errors.PathOutsideRoots: 422,
    errors.ModelNameTaken: 409,
    errors.ModelInUse: 409,
    errors.ModelUnusable: 409,
    errors.IdempotencyKeyReused: 422,
    errors.JobAlreadyFinished: 409,
    errors.ResultNotReady: 409,
    errors.QueueFull: 429,
    errors.BodyTooLarge: 413,
    errors.UnsupportedMediaType: 415,
    errors.ShuttingDown: 503,
}


class Problem(BaseModel):
    type: str = Field(examples=["urn:yolo-orch:problem:job_not_found"])
    title: str
    status: int
    detail: str
    code: str = Field(description="Stable machine-readable reason.")


class ValidationProblem(Problem):
    errors: list[dict[str, Any]]


def problem_response(
    status: int, code: str, detail: str, headers: dict[str, str] | None = None, **extra: Any
) -> JSONResponse:
    body = {
        "type": f"urn:yolo-orch:problem:{code}",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "code": code,
        **extra,
    }
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_MEDIA_TYPE)


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries so /docs shows the problem shape for each error status."""
    return {
        status: {
            "model": ValidationProblem if status == 422 else Problem,
            "content": {PROBLEM_MEDIA_TYPE: {}},
            "description": HTTPStatus(status).phrase,
        }
        for status in statuses
    }


async def _app_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, errors.YoloOrchError)
    status = next((s for cls, s in _STATUS.items() if isinstance(exc, cls)), 400)
    headers = None
    if isinstance(exc, errors.QueueFull):
        headers = {"Retry-After": str(exc.retry_after_s)}
    elif isinstance(exc, errors.Unauthorized):
        headers = {"WWW-Authenticate": "Bearer"}
    elif isinstance(exc, errors.ShuttingDown):
        headers = {"Retry-After": "5", "Connection": "close"}
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
        422, "invalid_request", f"{where}: {message}" if where else message, errors=details
    )


_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "body_too_large"}


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code) or HTTPStatus(exc.status_code).phrase.lower().replace(
        " ", "_"
    ).replace("-", "_")
    detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"no route for {request.method} {request.url.path}"
    return problem_response(exc.status_code, code, detail, dict(exc.headers or {}))


async def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return problem_response(500, "internal_error", "the server failed to handle this request")


def install_problem_handlers(app: FastAPI) -> None:
    app.add_exception_handler(errors.YoloOrchError, _app_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected_error)
