"""Liveness and readiness, open to everyone (no token) so probes and systemd can use them."""

from __future__ import annotations

import anyio
import anyio.to_thread
from fastapi import APIRouter
from fastapi.responses import JSONResponse

from yolo_orch.api.deps import ServicesDep
from yolo_orch.api.schemas import HeadState, Health, Readiness

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, summary="Liveness: the event loop answers")
async def healthz() -> Health:
    return Health(status="ok")


@router.get(
    "/readyz",
    response_model=Readiness,
    summary="Readiness: database writable, migrations at head, lanes present, not draining",
    description="200 `ready`; 200 `degraded` when some lane's GPU reports a fatal state or the "
    "lane is wedged (the others keep serving), or when every thread for request-time file work, "
    "or for expanding globs, is busy and requests wait for one (`file_workers_available` or "
    "`walk_workers_available` false), or when a disk is below `min_free_bytes` "
    "(`disk_space_ok` false: submissions and uploads get 507), or when the Ray cluster's head does "
    "not answer (`cluster_reachable` false: submissions commit and wait); 503 `not_ready` "
    "otherwise. On PostgreSQL with several heads: 503 `standby` on a head that is not the "
    "active one (`head` names the active one's URL, where its writes are sent).",
    responses={503: {"model": Readiness, "description": "Not ready"}},
)
async def readyz(services: ServicesDep) -> JSONResponse:
    leadership = services.leadership
    head = None
    if leadership is not None:
        head = HeadState(
            role=leadership.role, active_url=leadership.active_url, epoch=leadership.epoch
        )
    if head is not None and head.role != "active":
        known = {"active_head_known": head.active_url is not None}
        body = Readiness(status="standby", checks=known, head=head)
        return JSONResponse(body.model_dump(), status_code=503)
    try:
        await services.store.check_writable()
        writable = True
    except Exception:
        writable = False
    healthy = [lane.takes_work for lane in services.lanes]  # neither unhealthy nor wedged
    checks = {
        "database_writable": writable,
        "migrations_at_head": await anyio.to_thread.run_sync(services.migrations_at_head),
        "lanes_present": any(healthy),
        "accepting_jobs": not services.jobs.draining,
    }
    file_workers = _available(services.file_limiter)
    walk_workers = _available(services.walk_limiter)
    disk_space_ok = not await services.disk.check()
    cluster_reachable = services.cluster is None or services.cluster.reachable
    if not all(checks.values()):
        status = "not_ready"
    elif (
        not all(healthy)
        or not file_workers
        or not walk_workers
        or not disk_space_ok
        or not cluster_reachable
    ):
        status = "degraded"  # serving, but slower or on the lanes left; an operator should look
    else:
        status = "ready"
    body = Readiness(
        status=status,
        checks={
            **checks,
            "all_lanes_healthy": all(healthy),
            "file_workers_available": file_workers,
            "walk_workers_available": walk_workers,
            "disk_space_ok": disk_space_ok,
            "cluster_reachable": cluster_reachable,
        },
        head=head,
    )
    return JSONResponse(body.model_dump(), status_code=503 if status == "not_ready" else 200)


def _available(limiter: anyio.CapacityLimiter) -> bool:
    # Waiting requests, not merely busy threads: the pool is then the bottleneck.
    workers = limiter.statistics()
    return workers.borrowed_tokens < workers.total_tokens or workers.tasks_waiting == 0
