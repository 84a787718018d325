"""The app's longer-lived parts that its lifespan opens and closes through one exit stack: the
stores on their database (migrated first), the webhook outbox and its deliverer, capture's
writer thread, and the background tasks' cancellation. Wiring only: `app.py` decides what runs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.to_thread

from yolo_orch.config import MEMORY_DATABASE_URL, SQLITE_URL_PREFIX, Settings
from yolo_orch.domain.webhook_hosts import WebhookHosts
from yolo_orch.domain.webhook_routes import WebhookRoutes
from yolo_orch.files.managed_datasets import ManagedDatasets
from yolo_orch.jobs.service import JobService
from yolo_orch.labelling.ls_backend import LabelStudioBackend
from yolo_orch.labelling.ls_images import LabelStudioImages
from yolo_orch.ops.leadership import Leadership
from yolo_orch.registry.models import ModelRegistry
from yolo_orch.runners.dataset_capture import CaptureTarget, CaptureWriter
from yolo_orch.store import migrate
from yolo_orch.store.aliases import AliasStore
from yolo_orch.store.base import JobStore, ModelStore
from yolo_orch.store.database import Database
from yolo_orch.store.databases import database_for
from yolo_orch.store.head_lease import HeadLease
from yolo_orch.store.memory import InMemoryDatabase, InMemoryJobStore
from yolo_orch.store.memory_aliases import InMemoryAliasStore
from yolo_orch.store.memory_models import InMemoryModelStore
from yolo_orch.store.outbox import NO_OUTBOX, WebhookOutbox
from yolo_orch.store.outbox_memory import MemoryOutbox
from yolo_orch.store.outbox_sql import SqlOutbox
from yolo_orch.store.postgres_db import PostgresDatabase
from yolo_orch.store.sql_aliases import SqlAliasStore
from yolo_orch.store.sql_jobs import SqlJobStore
from yolo_orch.store.sql_models import SqlModelStore
from yolo_orch.webhooks.deliverer import Deliverer, RetryPolicy, Signer
from yolo_orch.webhooks.transport import webhook_client

log = logging.getLogger(__name__)


def storage_places(settings: Settings) -> dict[str, Path]:
    places = {"data_dir": settings.data_dir, "models_dir": settings.models_dir}
    if settings.store_url.startswith(SQLITE_URL_PREFIX):  # PostgreSQL's are the server's
        places["database"] = Path(settings.store_url.removeprefix(SQLITE_URL_PREFIX)).parent
    return places


@dataclass(frozen=True)
class Stores:
    jobs: JobStore
    models: ModelStore
    aliases: AliasStore
    migrations_at_head: Callable[[], bool]
    """Blocking; readiness runs it in a thread."""
    outbox: WebhookOutbox | None
    lease: HeadLease | None
    """On PostgreSQL, the lease of the active head among those sharing the database."""


async def open_stores(settings: Settings, stack: AsyncExitStack) -> Stores:
    """The job, model and alias stores on one shared database (in memory, SQLite or
    PostgreSQL: the durable stores run the same ops on either), closed once by `stack`."""
    if settings.database_url == MEMORY_DATABASE_URL:
        memory = InMemoryDatabase()
        models = InMemoryModelStore(memory)
        outbox = webhook_outbox(settings, None)
        jobs = InMemoryJobStore(memory, outbox or NO_OUTBOX)
        return Stores(jobs, models, InMemoryAliasStore(models), lambda: True, outbox, None)
    url = settings.store_url
    before = await anyio.to_thread.run_sync(migrate.current_revision, url)
    if before != migrate.SCHEMA_REVISION:  # else alembic has nothing to do: skip importing it
        await anyio.to_thread.run_sync(migrate.upgrade_to_head, url)
        log.info("database schema migrated from %s to %s", before, migrate.SCHEMA_REVISION)
    db = database_for(url)
    await db.open()
    stack.push_async_callback(db.close)
    head = migrate.SCHEMA_REVISION
    at_head = lambda: migrate.current_revision(url) == head  # noqa: E731
    outbox = webhook_outbox(settings, db)
    lease = None
    if isinstance(db, PostgresDatabase):
        lease = HeadLease(url, db)
        stack.push_async_callback(lease.close)  # before the database: its sessions end first
    job_store = SqlJobStore(db, outbox or NO_OUTBOX)
    return Stores(job_store, SqlModelStore(db), SqlAliasStore(db), at_head, outbox, lease)


def webhook_outbox(settings: Settings, db: Database | None) -> WebhookOutbox | None:
    """Where the job stores keep webhook events; None when webhooks are off (no secret)."""
    if not settings.webhook_secrets:
        return None
    routes = WebhookRoutes(settings.webhook_endpoints())
    every_s = settings.webhook_progress_every_s
    if db is None:
        return MemoryOutbox(routes, every_s)
    return SqlOutbox(db, routes, progress_every_s=every_s)


async def deliver_webhooks(
    settings: Settings, hosts: WebhookHosts, outbox: WebhookOutbox, stack: AsyncExitStack
) -> None:
    """Start the deliverer (it reads what is pending, from before a restart too); `stack`
    stops it, then closes its connections."""
    client = webhook_client(
        hosts,
        connections=settings.webhook_concurrency,
        timeout_s=settings.webhook_timeout_s,
    )
    stack.push_async_callback(client.aclose)
    deliverer = Deliverer(
        outbox,
        client,
        Signer(settings.webhook_signing_secrets()),
        RetryPolicy(
            settings.webhook_retry_for_s,
            settings.webhook_retry_base_s,
            settings.webhook_retry_max_s,
        ),
        concurrency=settings.webhook_concurrency,
        timeout_s=settings.webhook_timeout_s,
    )
    stack.push_async_callback(cancelled, asyncio.create_task(deliverer.run(), name="webhooks"))


def start_capture(datasets: CaptureTarget, stack: AsyncExitStack) -> CaptureWriter:
    """The thread that writes the images jobs capture (`runners.dataset_capture`); `stack`
    stops it once what is queued is written."""
    writer = CaptureWriter(datasets)
    writer.start()

    async def stop() -> None:
        await anyio.to_thread.run_sync(writer.stop)

    stack.push_async_callback(stop)
    return writer


def label_studio_backend(
    settings: Settings,
    datasets: ManagedDatasets,
    jobs: JobService,
    models: ModelRegistry,
    file_limiter: anyio.CapacityLimiter,
) -> LabelStudioBackend:
    """Label Studio's ML backend; the images of Label Studio's own tasks wait for their
    inference job in a folder of the datasets root (which the runners read)."""
    images = LabelStudioImages(
        settings.label_studio_url,
        settings.label_studio_token.get_secret_value(),
        max_bytes=settings.label_studio_max_image_bytes,
    )
    return LabelStudioBackend(
        datasets,
        jobs,
        models,
        images,
        scratch=settings.datasets_root / ".label-studio",
        predict_wait_s=settings.label_studio_predict_wait_s,
        file_limiter=file_limiter,
    )


async def lead(
    settings: Settings,
    lease: HeadLease | None,
    activate: Callable[[], Awaitable[None]],
    stack: AsyncExitStack,
) -> Leadership | None:
    """Run `activate` now, where this server is the only one (no lease: SQLite, memory); on
    PostgreSQL, as soon as this head holds the lease (at once if no other head does)."""
    if lease is None:
        await activate()
        return None
    leadership = Leadership(
        lease,
        name=f"{socket.gethostname()}:{os.getpid()}",
        url=settings.advertised_url,
        timeout_s=settings.head_lease_timeout_s,
        on_active=activate,
    )
    # Its task is stopped after what `activate` stacks (the drain among it): a draining head
    # keeps renewing its lease, which goes when its connection closes, after the drain.
    stack.push_async_callback(cancelled, asyncio.create_task(leadership.run(), name="lease"))
    await leadership.start()
    return leadership


async def cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
