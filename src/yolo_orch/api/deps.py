"""What the routes depend on, built once by the app's lifespan and read from `app.state`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

import anyio
from fastapi import Depends, Request

from yolo_orch.api.gpu_history import TelemetryHistory
from yolo_orch.api.prometheus import Metrics
from yolo_orch.config import Settings
from yolo_orch.dispatch.dispatcher import Dispatcher
from yolo_orch.dispatch.executor import ClusterView
from yolo_orch.dispatch.lanes import Lanes
from yolo_orch.domain.webhook_hosts import NO_WEBHOOK_HOSTS, WebhookHosts
from yolo_orch.files.jobfiles import JobFiles
from yolo_orch.files.managed_datasets import ManagedDatasets
from yolo_orch.jobs.notifications import JobEvents
from yolo_orch.jobs.service import JobService
from yolo_orch.labelling.ls_backend import LabelStudioBackend
from yolo_orch.labelling.ls_sync import LabelStudioSync
from yolo_orch.ops.diskguard import DiskGuard
from yolo_orch.ops.frame_feed import FrameFeed
from yolo_orch.ops.leadership import Leadership
from yolo_orch.ops.retention import Retention
from yolo_orch.ops.telemetry import GpuTelemetry
from yolo_orch.registry.models import ModelRegistry
from yolo_orch.runners.base import Runtime
from yolo_orch.store.base import JobStore
from yolo_orch.store.outbox import WebhookOutbox


@dataclass(frozen=True)
class Services:
    settings: Settings
    store: JobStore
    models: ModelRegistry
    runtime: Runtime
    files: JobFiles
    lanes: Lanes
    dispatcher: Dispatcher
    events: JobEvents
    metrics: Metrics
    telemetry: GpuTelemetry | None
    jobs: JobService
    migrations_at_head: Callable[[], bool]
    """Blocking; readiness runs it in a thread."""
    file_limiter: anyio.CapacityLimiter
    walk_limiter: anyio.CapacityLimiter
    """The threads for request-time file work (see `JobService`)."""
    retention: Retention
    disk: DiskGuard
    telemetry_history: TelemetryHistory
    frames: FrameFeed
    """The live frames of running streams (their `frame` events)."""
    datasets: ManagedDatasets
    """The managed datasets (/v1/datasets, capture, Label Studio): blocking, call them from
    a worker thread (`file_limiter`)."""
    label_studio: LabelStudioBackend
    """Label Studio's ML backend (/ls/{dataset}/...)."""
    label_studio_sync: LabelStudioSync
    """Pushes to and pulls from Label Studio projects (/v1/datasets/{name}/push|pull)."""
    cluster: ClusterView | None = None
    """With `executor = "ray"`: the cluster's nodes and whether its head answers."""
    webhook_hosts: WebhookHosts = NO_WEBHOOK_HOSTS
    """Where webhooks may go: `check(url)` refuses a submission's (`webhook_not_allowed`)."""
    webhook_outbox: WebhookOutbox | None = None
    """The webhook events kept and their tries; None when webhooks are off (no secret)."""
    leadership: Leadership | None = None
    """On PostgreSQL: whether this head is the active one (`ops/leadership.py`); None on
    SQLite and in memory, where the one server is always active."""


# Dependencies are async so FastAPI runs them on the loop, not in a worker thread each.
async def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


async def get_job_service(request: Request) -> JobService:
    services: Services = request.app.state.services
    return services.jobs


ServicesDep = Annotated[Services, Depends(get_services)]
JobServiceDep = Annotated[JobService, Depends(get_job_service)]


async def require_disk_space(request: Request) -> None:
    """Refuse (507) what would be stored while a disk is short of space, before any of it is
    read. Async, with no await: FastAPI runs it on the loop, not in a thread."""
    services: Services = request.app.state.services
    services.disk.require()


DiskSpace = Depends(require_disk_space)
