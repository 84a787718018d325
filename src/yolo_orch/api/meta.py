"""/v1/meta: what the server defines that clients would otherwise copy: the job states (and which
are terminal), each kind with its params' JSON schema, and every error code with its meaning. The
dashboard builds its filters and its submit form from it.

It never changes while the process runs, so it is built once, on the first request, and served
with an ETag: `If-None-Match` answers 304. `no-cache` makes a client ask again each time (a
restart may bring a new version), which costs it a 304."""

from __future__ import annotations

import hashlib
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request, Response
from pydantic import BaseModel, Field

from yolo_orch import __version__
from yolo_orch.api.deps import ServicesDep
from yolo_orch.api.model_files import etag_matches
from yolo_orch.domain import SIM_MODEL, JobKind, JobState
from yolo_orch.errors import ErrorCode
from yolo_orch.kinds import KINDS
from yolo_orch.params.common import StrictParams
from yolo_orch.runners.base import Runtime

router = APIRouter(prefix="/v1/meta", tags=["meta"])

CACHE_CONTROL = "no-cache"


def params_model(kind: JobKind) -> type[StrictParams]:
    """The pydantic model of a kind's `params`: the one place this module learns them."""
    return KINDS[kind].params


class KindMeta(BaseModel):
    kind: JobKind
    params: dict[str, Any] = Field(
        description="The JSON schema of the kind's `params`: each one's type, default, bounds, "
        "allowed values and description (`x-tasks`: the model tasks it applies to).",
    )
    runtime_models: list[str] = Field(
        description="Models the server's runtime provides itself, without weights in the "
        "registry (`sim` on the simulated runtime).",
        examples=[["sim"]],
    )


class ErrorCodeMeta(BaseModel):
    code: ErrorCode
    meaning: str


class Meta(BaseModel):
    version: str = Field(description="The server's version.")
    states: list[JobState] = Field(description="Every job state, in the order a job meets them.")
    terminal_states: list[JobState] = Field(description="The states a job never leaves.")
    kinds: list[KindMeta]
    error_codes: list[ErrorCodeMeta] = Field(
        description="Every machine `code` of a problem answer or of a failed job's `error`."
    )


def server_meta(runtime: Runtime) -> Meta:
    return Meta(
        version=__version__,
        states=list(JobState),
        terminal_states=[state for state in JobState if state.is_terminal],
        kinds=[
            KindMeta(
                kind=kind,
                params=params_model(kind).model_json_schema(),
                runtime_models=[SIM_MODEL] if runtime.provides(SIM_MODEL, kind) else [],
            )
            for kind in KINDS
        ],
        error_codes=[ErrorCodeMeta(code=code, meaning=code.meaning) for code in ErrorCode],
    )


@router.get(
    "",
    response_model=Meta,
    summary="States, kinds and their params, error codes",
    responses={304: {"description": "Not Modified: `If-None-Match` names the ETag."}},
)
async def meta(
    request: Request,
    services: ServicesDep,
    if_none_match: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> Response:
    served: tuple[bytes, str] | None = getattr(request.app.state, "meta_answer", None)
    if served is None:  # the app's first request for it: kept with the app, as its services are
        body = server_meta(services.runtime).model_dump_json().encode()
        served = body, f'"{hashlib.sha256(body).hexdigest()[:32]}"'
        request.app.state.meta_answer = served
    body, etag = served
    headers = {"ETag": etag, "Cache-Control": CACHE_CONTROL}
    if etag_matches(if_none_match, etag):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)
