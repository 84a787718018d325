"""/metrics in Prometheus' text format."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST

from yolo_orch.api.deps import ServicesDep

router = APIRouter(tags=["health"])


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    description="Jobs by state and kind, queue depth, run times, lane occupancy, 429 refusals, "
    "model cache hits and misses. Needs a token when tokens are configured, unless "
    "`metrics_public` is set.",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}},
)
async def metrics(services: ServicesDep) -> Response:
    return Response(await services.metrics.render(), media_type=CONTENT_TYPE_LATEST)
