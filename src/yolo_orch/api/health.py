"""Liveness and readiness, open to everyone (no token) so probes and systemd can use them."""

from __future__ import annotations

import anyio.to_thread
from fastapi import APIRouter
from fastapi.responses import JSONResponse

from yolo_orch.api.deps import ServicesDep
from yolo_orch.api.schemas import Health, Readiness

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, summary="Liveness: the event loop answers")
async def healthz() -> Health:
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Readiness,
    summary="Readiness: database writable, migrations at head, lanes present, not draining",
    responses={503: {"model": Readiness, "description": "Not ready"}},
)
async def readyz(services: ServicesDep) -> JSONResponse:
    try:
        await services.store.check_writable()
        writable = True
    except Exception:
        writable = False
    checks = {
        "database_writable": writable,
        "migrations_at_head": await anyio.to_thread.run_sync(services.migrations_at_head),
        "lanes_present": len(services.lanes) > 0,
        "accepting_jobs": not services.jobs.draining,
    }
    ready = all(checks.values())
    body = Readiness(status="ready" if ready else "not_ready", checks=checks)
    return JSONResponse(body.model_dump(), status_code=200 if ready else 503)
