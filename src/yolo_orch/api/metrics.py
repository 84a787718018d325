"""/metrics in Prometheus' text format."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from yolo_orch.api.auth import require
from yolo_orch.api.deps import ServicesDep
from yolo_orch.config import Scope

router = APIRouter(tags=["health"])


async def _token_unless_public(request: Request, services: ServicesDep) -> None:
    if not services.settings.metrics_public:
        await require(Scope.JOBS)(request, services)


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    description="Jobs by state and kind, queue depth, run times, lane occupancy, 429 refusals, "
    "model cache hits and misses. Needs a token when tokens are configured, unless "
    "`metrics_public` is set.",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}},
    dependencies=[Depends(_token_unless_public)],
)
async def metrics(services: ServicesDep) -> Response:
    return Response(await services.metrics.render(), media_type=CONTENT_TYPE_LATEST)
