"""Wiring: `create_app(settings)` and the one lifespan that builds and stops every service."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI

from yolo_orch import __version__
from yolo_orch.admission import Lanes
from yolo_orch.api import health, jobs
from yolo_orch.api.deps import Services
from yolo_orch.api.problems import install_problem_handlers
from yolo_orch.config import MEMORY_DATABASE_URL, Settings
from yolo_orch.dispatcher import Dispatcher
from yolo_orch.executor import ThreadExecutor
from yolo_orch.jobfiles import JobFiles
from yolo_orch.lock import InstanceLock
from yolo_orch.runners.base import Runtime
from yolo_orch.runners.simulated import SimulatedRuntime
from yolo_orch.service import JobService
from yolo_orch.store import migrate
from yolo_orch.store.base import JobStore
from yolo_orch.store.memory import InMemoryJobStore
from yolo_orch.store.sqlite import SQLiteJobStore

log = logging.getLogger(__name__)


def create_app(settings: Settings, *, runtime: Runtime | None = None) -> FastAPI:
    """`runtime` replaces the one `settings.runtime` names (tests pass their own)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            app.state.services = await _start(settings, runtime, stack)
            yield

    app = FastAPI(
        title="yolo-orch",
        version=__version__,
        summary="Runs YOLO inference and training jobs on the GPUs of one host.",
        lifespan=lifespan,
    )
    install_problem_handlers(app)
    app.include_router(jobs.router)
    app.include_router(health.router)
    return app


async def _start(settings: Settings, runtime: Runtime | None, stack: AsyncExitStack) -> Services:
    lock = InstanceLock(settings.data_dir)
    lock.acquire()
    stack.callback(lock.release)

    store, migrations_at_head = await _open_store(settings)
    stack.push_async_callback(store.close)

    runtime = runtime or build_runtime(settings)
    lanes = Lanes(settings.lanes or runtime.lanes(), settings.slots_per_lane)
    files = JobFiles(settings.jobs_dir)
    dispatcher = Dispatcher(store, lanes, ThreadExecutor(runtime, lanes.total_slots), files)
    service = JobService(
        store,
        dispatcher,
        runtime,
        files,
        lane_count=len(lanes),
        total_slots=lanes.total_slots,
        max_queued=settings.max_queued,
    )
    await dispatcher.recover()
    dispatcher_task = asyncio.create_task(dispatcher.run(), name="dispatcher")

    async def stop() -> None:
        service.draining = True
        await dispatcher.drain(settings.shutdown_grace_s)
        await dispatcher_task

    stack.push_async_callback(stop)
    log.info(
        "serving with the %s runtime on lanes %s (%d slot(s) each)",
        runtime.name,
        ", ".join(lanes.ids),
        settings.slots_per_lane,
    )
    return Services(
        settings=settings,
        store=store,
        lanes=lanes,
        dispatcher=dispatcher,
        jobs=service,
        migrations_at_head=migrations_at_head,
    )


async def _open_store(settings: Settings) -> tuple[JobStore, Callable[[], bool]]:
    store: JobStore
    if settings.database_url == MEMORY_DATABASE_URL:
        store = InMemoryJobStore()
        await store.open()
        return store, lambda: True
    url = settings.sqlite_url
    await anyio.to_thread.run_sync(migrate.upgrade_to_head, url)
    store = SQLiteJobStore(url)
    await store.open()
    head = migrate.head_revision()
    return store, lambda: migrate.current_revision(url) == head


def build_runtime(settings: Settings) -> Runtime:
    if settings.runtime == "simulated":
        return SimulatedRuntime(settings.sim_lanes)
    raise NotImplementedError(
        'runtime "auto" (real YOLO runners) is not available yet; use runtime = "simulated"'
    )
