"""Wiring: `create_app(settings)` and the one lifespan that builds and stops every service."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
import anyio.to_thread
from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware

from yolo_orch import __version__
from yolo_orch.api import activity_history as activity_api
from yolo_orch.api import (
    aliases,
    devices,
    health,
    job_images,
    jobs,
    meta,
    model_files,
    models,
    submit,
)
from yolo_orch.api import chains as chains_api
from yolo_orch.api import data_files as data_files_api
from yolo_orch.api import datasets as datasets_api
from yolo_orch.api import deliveries as deliveries_api
from yolo_orch.api import events as events_api
from yolo_orch.api import label_studio as label_studio_api
from yolo_orch.api import label_studio_sync as label_studio_sync_api
from yolo_orch.api import metrics as metrics_api
from yolo_orch.api import queue as queue_api
from yolo_orch.api import streams as streams_api
from yolo_orch.api.auth import BearerAuth, TokenCheck
from yolo_orch.api.deps import Services
from yolo_orch.api.docs import install_docs
from yolo_orch.api.gpu_history import TelemetryHistory, gpu_sampler
from yolo_orch.api.heads import StandbyRedirect
from yolo_orch.api.limits import BodyLimits
from yolo_orch.api.origins import EXPOSED_HEADERS, SameOrigin, host_names
from yolo_orch.api.problems import install_problem_handlers, install_problem_openapi
from yolo_orch.api.prometheus import ConnectionCounts, Metrics
from yolo_orch.api.protocol import HeadAsGet
from yolo_orch.config import Settings, server_paths
from yolo_orch.dispatch.batching import BatchPolicy
from yolo_orch.dispatch.dispatcher import Dispatcher
from yolo_orch.dispatch.executor import Executor, ThreadExecutor
from yolo_orch.dispatch.lanes import Lanes
from yolo_orch.dispatch.model_refs import ModelRefs
from yolo_orch.dispatch.run_limits import RunLimits
from yolo_orch.domain import JobKind
from yolo_orch.domain.streams import AllowedHosts
from yolo_orch.files.class_names import ClassNameLimits
from yolo_orch.files.images import limit_decoders
from yolo_orch.files.inputs import InputLimits
from yolo_orch.files.jobfiles import JobFiles
from yolo_orch.files.managed_datasets import ManagedDatasets
from yolo_orch.jobs.notifications import JobEvents, PublishingJobStore
from yolo_orch.jobs.service import JobService
from yolo_orch.jobs.tune import Tunes
from yolo_orch.labelling.ls_sync import LabelStudioSync
from yolo_orch.ops.diskguard import DiskGuard, FreeSpace, statvfs_free
from yolo_orch.ops.frame_feed import FrameFeed
from yolo_orch.ops.host_readings import HostReadings
from yolo_orch.ops.lock import InstanceLock
from yolo_orch.ops.logs import install_job_logs, remove_job_logs
from yolo_orch.ops.retention import Retention, RetentionRules
from yolo_orch.ops.telemetry import GpuTelemetry
from yolo_orch.registry.models import ModelRegistry
from yolo_orch.registry.promotion import Promotions
from yolo_orch.registry.weights import CheckpointInfo
from yolo_orch.runners.base import Runtime
from yolo_orch.runners.dataset_capture import CaptureWriter
from yolo_orch.runners.simulated import SimulatedRuntime
from yolo_orch.runners.stream import StreamOutputs
from yolo_orch.runners.variant_check import check_on_cpu
from yolo_orch.ui import install_ui
from yolo_orch.wiring import (
    cancelled,
    deliver_webhooks,
    label_studio_backend,
    lead,
    open_stores,
    start_capture,
    storage_places,
)

log = logging.getLogger(__name__)


def create_app(
    settings: Settings,
    *,
    runtime: Runtime | None = None,
    telemetry: GpuTelemetry | None = None,
    free_space: FreeSpace = statvfs_free,
    connections: ConnectionCounts | None = None,
) -> FastAPI:
    """`runtime`, `telemetry` and `free_space` replace the ones the settings would make (tests
    pass fakes); `connections`: the server's cap on client connections, for /metrics."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            services = await _start(settings, runtime, telemetry, free_space, stack)
            if connections is not None:
                services.metrics.count_connections(connections)
            app.state.services = services
            yield

    app = FastAPI(
        title="yolo-orch",
        version=__version__,
        summary="Runs YOLO inference, training, validation and export jobs on the GPUs of one "
        "host, or of a Ray cluster.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    tokens = TokenCheck(
        settings.tokens,
        metrics_public=settings.metrics_public,
        docs_require_token=settings.docs_require_token,
    )
    install_docs(app)  # from the package's own assets: no CDN
    install_ui(app)  # the dashboard, at / and /ui, also from the package
    install_problem_handlers(app)
    install_problem_openapi(app, tokens.needs_token if tokens.enabled else None)
    routers = (
        submit.router,
        jobs.router,
        models.router,
        aliases.router,
        model_files.router,
        devices.router,
        data_files_api.router,
    )
    for router in (
        *routers,
        health.router,
        events_api.router,
        job_images.router,
        meta.router,
        metrics_api.router,
    ):
        app.include_router(router)
    app.include_router(streams_api.router)
    app.include_router(deliveries_api.router)
    app.include_router(chains_api.router)
    app.include_router(activity_api.router)
    app.include_router(queue_api.router)
    app.include_router(datasets_api.router)
    app.include_router(label_studio_api.router)
    app.include_router(label_studio_sync_api.router)
    # The last added runs first: HEAD becomes GET, then other sites' pages are answered
    # (CORS, for the allowed ones) or refused, the token is checked, a standby head sends
    # writes on, then the body's size and pace, all before the app reads anything; event
    # streams end when the server stops.
    app.add_middleware(events_api.EndStreamsOnStop, stopped=lambda: app.state.services.jobs.stopped)
    app.add_middleware(
        BodyLimits,
        max_request_bytes=settings.max_request_bytes,
        max_upload_bytes=settings.max_upload_bytes,
        max_discard_bytes=settings.max_discard_bytes,
        body_idle_timeout_s=settings.body_idle_timeout_s,
        upload_routes=[
            ("POST", "/v1/jobs/inference"),
            ("POST", "/v1/models"),
            ("POST", "/v1/models/{ref}/variants"),
            ("POST", "/ls/{dataset}/predict"),  # tasks come with their annotations
            ("POST", "/ls/{dataset}/webhook"),
        ],
    )
    # A standby head sends what writes to the active one, once the token is checked.
    app.add_middleware(StandbyRedirect, leadership=lambda: app.state.services.leadership)
    app.add_middleware(BearerAuth, check=tokens)
    app.add_middleware(
        SameOrigin,
        hosts=host_names(settings.host, settings.allowed_hosts),
        allowed_origins=settings.allowed_origins,
    )
    if settings.allowed_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.allowed_origins,
            allow_methods=["*"],
            allow_headers=["*"],
            expose_headers=EXPOSED_HEADERS,
        )
    app.add_middleware(HeadAsGet)
    return app


async def _start(
    settings: Settings,
    runtime: Runtime | None,
    telemetry: GpuTelemetry | None,
    free_space: FreeSpace,
    stack: AsyncExitStack,
) -> Services:
    lock = InstanceLock(settings.lock_files)
    lock.acquire()
    stack.callback(lock.release)
    job_logs = install_job_logs(settings.jobs_dir)
    stack.callback(remove_job_logs, job_logs)

    stores = await open_stores(settings, stack)
    outbox = stores.outbox
    events = JobEvents()
    store = PublishingJobStore(stores.jobs, events)
    webhook_hosts = settings.webhook_hosts()
    inspect = functools.partial(_inspect, settings.data_dir / "ultralytics")
    class_name_limits = ClassNameLimits(settings.max_class_names, settings.max_class_names_bytes)
    # Request-time file work gets its own threads: not the jobs', not anyio's default pool.
    file_limiter = anyio.CapacityLimiter(settings.request_file_threads)
    walk_limiter = anyio.CapacityLimiter(settings.request_walk_threads)
    models = ModelRegistry(
        stores.models,
        settings.models_dir,
        settings.model_roots,
        inspect,
        class_name_limits,
        check_variant=check_on_cpu(settings.data_dir / "ultralytics"),
        file_limiter=file_limiter,
        variant_retire_after_failures=settings.variant_retire_after_failures,
        aliases=stores.aliases,
    )
    limit_decoders(settings.max_image_pixels)
    datasets = ManagedDatasets(settings.datasets_root, class_name_limits)

    batching = BatchPolicy(
        {str(kind): images for kind, images in settings.batch_max_images.items()},
        settings.batch_window_ms / 1000,
    )
    streams = StreamOutputs(
        FrameFeed(asyncio.get_running_loop()),
        settings.stream_segment_s,
        settings.stream_segments_kept,
        max_batch=batching.capacity,
    )
    models.aliases.on_move(streams.aliases.moved)  # running streams switch model
    capture = start_capture(datasets, stack)  # stopped after the jobs' drain
    if runtime is None:
        runtime = await anyio.to_thread.run_sync(build_runtime, settings, models, streams, capture)
    files = JobFiles(settings.jobs_dir, settings.max_result_bytes, settings.inline_result_bytes)
    stack.callback(files.starts.close)
    cluster = None
    executor: Executor
    if settings.executor == "ray":
        from yolo_orch.ray_cluster.wiring import connect  # the `ray` extra

        cluster = await connect(settings, models, stack, files.starts)
        lanes, executor = cluster.lanes, cluster.executor
    else:
        lane_ids = settings.lanes or runtime.lanes()
        lanes = Lanes(lane_ids, settings.slots_per_lane, stream_shares=settings.stream_shares)
        executor = ThreadExecutor(
            runtime,
            lanes.total_slots,
            files.starts,
            stream_capacity=sum(lane.stream_slots for lane in lanes),
        )
    if telemetry is None and settings.gpu_telemetry:
        telemetry = GpuTelemetry()
    if telemetry is not None:
        stack.callback(telemetry.close)
    metrics = Metrics(store, lanes, runtime, telemetry)
    tunes = Tunes(store, files, slot_count=lambda: lanes.total_slots)
    dispatcher = Dispatcher(
        store,
        lanes,
        executor,
        files,
        on_run_end=metrics.job_finished,
        batching=batching,
        on_batch=metrics.batch_ran,
        limits=RunLimits(
            timeout_s={str(kind): s for kind, s in settings.timeout_s.items()},
            stall_after_s=settings.stall_after_s,
            wedge_grace_s=settings.wedge_grace_s,
        ),
        priority_aging_per_minute=settings.priority_aging_per_minute,
        shown_paths=server_paths(settings),
        model_refs=ModelRefs(store, functools.partial(_model_id, models)),
        head_runners={
            JobKind.PROMOTE: Promotions(store, models.aliases).run,
            JobKind.TUNE: tunes.run,
        },
    )
    store.on_released = dispatcher.wake  # jobs that waited for others may start now
    service = JobService(
        store,
        dispatcher,
        runtime,
        models,
        files,
        max_gpus=lambda: lanes.largest_node,
        settle_logs=job_logs.settle,
        lane_ids=lanes.ids,
        total_slots=lanes.total_slots,
        max_queued=settings.max_queued,
        data_roots=settings.data_roots,
        input_limits=InputLimits(
            max_files=settings.max_files_per_job,
            max_walk_entries=settings.max_walk_entries,
            walk_timeout_s=settings.input_walk_timeout_s,
        ),
        class_name_limits=class_name_limits,
        max_image_pixels=settings.max_image_pixels,
        file_limiter=file_limiter,
        walk_limiter=walk_limiter,
        events=events,
        no_exports=cluster is not None,
        on_cluster=cluster is not None,
        stream_hosts=AllowedHosts(tuple(settings.stream_allowed_hosts)),
        check_webhook=webhook_hosts.check,  # none allowed without webhook_secrets
        stream_fps=max((lane.stream_fps for lane in lanes if lane.stream_slots), default=0.0),
        datasets=datasets,
    )
    tunes.attach(service)  # a tune's trials are submitted and cancelled as clients' are
    retention = Retention(
        store,
        files,
        settings.models_dir,
        RetentionRules(
            settings.retention_days, settings.max_finished_jobs, settings.orphan_grace_s
        ),
        limiter=file_limiter,
        on_removed=metrics.removed,
        settle_logs=job_logs.settle,
    )
    disk = DiskGuard(storage_places(settings), settings.min_free_bytes, free_space)
    await disk.check()  # the first look, before any submission
    disk_task = asyncio.create_task(disk.run(settings.disk_check_interval_s), name="disk-guard")
    stack.push_async_callback(cancelled, disk_task)
    if telemetry is not None and any(lane.gpu_index is not None for lane in lanes):
        watcher = asyncio.create_task(
            watch_gpu_health(lanes, telemetry, dispatcher, settings.gpu_health_interval_s),
            name="gpu-health",
        )
        stack.callback(watcher.cancel)

    telemetry_history = TelemetryHistory(
        gpu_sampler(lanes, telemetry),
        interval_s=settings.telemetry_history_interval_s,
        samples=settings.telemetry_history_samples,
    )
    if telemetry_history.enabled:
        sampling = asyncio.create_task(telemetry_history.run(), name="telemetry-history")
        stack.push_async_callback(cancelled, sampling)

    activity = activity_api.ActivitySampler(
        store,
        lanes,
        metrics,
        HostReadings(settings.data_dir),
        nodes=None if cluster is None else cluster.node_infos,
    )
    activity_sampling = asyncio.create_task(activity.run(), name="activity-history")
    stack.push_async_callback(cancelled, activity_sampling)

    async def activate() -> None:
        """What only the active head runs: the one server on SQLite, at once."""
        await dispatcher.recover()
        if cluster is not None:
            cluster.watcher.on_change = dispatcher.wake
            stack.push_async_callback(
                cancelled, asyncio.create_task(cluster.watcher.run(), name="ray-nodes")
            )
            stack.push_async_callback(
                cancelled, asyncio.create_task(cluster.telemetry.run(), name="ray-telemetry")
            )
        dispatcher_task = asyncio.create_task(dispatcher.run(), name="dispatcher")
        retention_task = asyncio.create_task(
            retention.run(settings.retention_interval_s), name="retention"
        )
        stack.push_async_callback(cancelled, retention_task)
        if outbox is not None:  # the deliverer stops after the drain below
            await deliver_webhooks(settings, webhook_hosts, outbox, stack)

        async def stop() -> None:
            await service.drain(settings.shutdown_grace_s)
            await dispatcher_task

        stack.push_async_callback(stop)

    leadership = await lead(settings, stores.lease, activate, stack)
    return Services(
        settings=settings,
        store=store,
        models=models,
        runtime=runtime,
        files=files,
        lanes=lanes,
        dispatcher=dispatcher,
        events=events,
        frames=streams.feed,
        datasets=datasets,
        label_studio=label_studio_backend(settings, datasets, service, models, file_limiter),
        label_studio_sync=LabelStudioSync(
            datasets,
            settings.label_studio_url,
            settings.label_studio_token.get_secret_value(),
            file_limiter=file_limiter,
        ),
        metrics=metrics,
        telemetry=telemetry,
        jobs=service,
        migrations_at_head=stores.migrations_at_head,
        file_limiter=file_limiter,
        walk_limiter=walk_limiter,
        retention=retention,
        disk=disk,
        telemetry_history=telemetry_history,
        cluster=cluster,
        webhook_hosts=webhook_hosts,
        webhook_outbox=outbox,
        leadership=leadership,
    )


async def _model_id(models: ModelRegistry, ref: str) -> str:
    """The id of the model `ref` names now (a dispatcher's resolution of `name@alias`, and its
    check that a chain's produced model is still there)."""
    return (await models.get(ref)).id


async def watch_gpu_health(
    lanes: Lanes, telemetry: GpuTelemetry, dispatcher: Dispatcher, interval_s: float
) -> None:
    """Take lanes whose GPU reports a fatal state out of admission, and back when it recovers."""
    while True:
        for lane in lanes:
            if lane.gpu_index is None:
                continue
            healthy = await anyio.to_thread.run_sync(telemetry.health, lane.gpu_index)
            if healthy != lane.healthy:
                lane.healthy = healthy
                log.log(
                    logging.INFO if healthy else logging.ERROR,
                    "lane %s is %s",
                    lane.id,
                    "healthy again" if healthy else "unhealthy: its GPU reports a fatal state",
                )
                dispatcher.wake()
        await asyncio.sleep(interval_s)


def build_runtime(
    settings: Settings,
    models: ModelRegistry,
    streams: StreamOutputs | None = None,
    capture: CaptureWriter | None = None,
) -> Runtime:
    """Blocking: the real runtime imports torch and ultralytics."""
    if settings.runtime == "simulated":
        return SimulatedRuntime(settings.sim_lanes, streams, capture)
    from yolo_orch.runners.yolo import RegistryAccess, UltralyticsRuntime

    return UltralyticsRuntime(
        RegistryAccess(models),
        settings.data_dir / "ultralytics",
        model_cache_size=settings.model_cache_size,
        data_roots=settings.job_read_roots,  # training reads the managed datasets too
        cpu_threads=settings.cpu_threads,
        max_image_pixels=settings.max_image_pixels,
        max_slices_per_image=settings.max_slices_per_image,
        # On a cluster the nodes decode: the uploads travel to them as bytes.
        decode_ahead_bytes=0 if settings.executor == "ray" else settings.decode_ahead_mb << 20,
        streams=streams,
        capture=capture,
    )


def _inspect(ultralytics_dir: Path, path: Path) -> CheckpointInfo:
    # Imports torch and ultralytics on the first import of weights, after making it safe.
    from yolo_orch.registry.weights import inspect_checkpoint
    from yolo_orch.runners.yolo_env import configure_ultralytics

    configure_ultralytics(ultralytics_dir)
    return inspect_checkpoint(path)
