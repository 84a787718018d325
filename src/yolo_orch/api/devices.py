"""/v1/devices: what every lane is doing."""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio.to_thread
from fastapi import APIRouter

from yolo_orch.api.deps import Services, ServicesDep
from yolo_orch.api.device_schemas import (
    DeviceHistory,
    DeviceList,
    GpuReadingPublic,
    HeldVariantPublic,
    LaneHistory,
    LanePublic,
    NodePublic,
    SamplePublic,
    StreamSharePublic,
)
from yolo_orch.dispatch.lanes import Lane
from yolo_orch.errors import JobNotFound
from yolo_orch.ops.telemetry import GpuReading, NodeReading

router = APIRouter(prefix="/v1/devices", tags=["devices"])


@router.get("", response_model=DeviceList, summary="Lanes, their jobs and loaded models")
async def list_devices(services: ServicesDep) -> DeviceList:
    names = {model.sha256: model.name for model in await services.models.list_models()}
    devices = []
    for lane in services.lanes:
        reading = await gpu_reading(services, lane)
        device_name = await _gpu_name(services, lane) if reading else None
        batches = services.metrics.batches(lane.id)
        devices.append(
            LanePublic(
                id=lane.id,
                slots=lane.slots,
                busy=lane.busy,
                jobs=sorted(lane.jobs | lane.batched),
                batch_sizes=dict(sorted(batches.sizes.items())),
                batch_mean_jobs=batches.mean_jobs,
                batch_wait_s=batches.wait_s,
                models=[
                    names.get(sha, sha[:12]) for sha in services.runtime.cached_models(lane.id)
                ],
                healthy=lane.healthy,
                wedged=lane.wedged,
                device_name=device_name,
                stream_slots=lane.stream_slots,
                stream_fps=lane.stream_fps,
                streams=await _stream_shares(services, lane),
                **(dataclasses.asdict(reading) if reading else {}),
            )
        )
    nodes = None
    if services.cluster is not None:
        held = await _variants_by_digest(services)
        nodes = [
            NodePublic(
                name=node.name,
                address=node.address,
                lanes=[lane.id for lane in services.lanes if lane.node == node.name],
                models=[names.get(sha, sha[:12]) for sha in node.models if sha not in held],
                variants=[held[sha] for sha in node.models if sha in held],
                **_node_reading(node.reading),
            )
            for node in services.cluster.node_infos()
        ]
    return DeviceList(runtime=services.runtime.name, devices=devices, nodes=nodes)


async def _stream_shares(services: Services, lane: Lane) -> list[StreamSharePublic]:
    """The lane's streams, each with what it asked and what it does (its job's progress)."""
    shares = []
    for job_id, share in sorted(lane.streams.items()):  # a copy: the dispatcher may change it
        try:
            job = await services.jobs.get(job_id)
        except JobNotFound:  # deleted meanwhile
            continue
        detail = job.progress.detail if job.progress is not None else None
        fps_out = detail.get("fps_out") if isinstance(detail, dict) else None
        shares.append(
            StreamSharePublic(
                job_id=job_id,
                fps_asked=share.fps,
                fps_out=fps_out if isinstance(fps_out, int | float) else None,
            )
        )
    return shares


async def _variants_by_digest(services: Services) -> dict[str, HeldVariantPublic]:
    """Every registered variant, by the manifest digest a node's cache keeps it under."""
    held: dict[str, HeldVariantPublic] = {}
    for model in await services.models.list_models():
        for variant in await services.models.variants.list_for(model.id):
            held.setdefault(
                variant.sha256,
                HeldVariantPublic(
                    id=variant.id,
                    model=model.name,
                    format=str(variant.format),
                    size_bytes=variant.size_bytes,
                ),
            )
    return held


def _node_reading(reading: NodeReading | None) -> dict[str, Any]:
    if reading is None:
        return {}
    return {
        "gpus": [GpuReadingPublic(**dataclasses.asdict(gpu)) for gpu in reading.gpus],
        "load_1m": reading.load_1m,
        "memory_used_bytes": reading.memory_used_bytes,
        "memory_total_bytes": reading.memory_total_bytes,
        "read_at": reading.read_at,
    }


async def gpu_reading(services: Services, lane: Lane) -> GpuReading | None:
    if services.telemetry is None or lane.gpu_index is None:
        return None
    return await anyio.to_thread.run_sync(services.telemetry.read, lane.gpu_index)  # may hang


async def _gpu_name(services: Services, lane: Lane) -> str | None:
    if services.telemetry is None or lane.gpu_index is None:
        return None
    return await anyio.to_thread.run_sync(services.telemetry.name, lane.gpu_index)


@router.get(
    "/history",
    response_model=DeviceHistory,
    summary="The last minutes of each GPU's readings",
    description="Sampled from NVML every `telemetry_history_interval_s`, the last "
    "`telemetry_history_samples` kept in memory per lane (a restart forgets them). Empty "
    "without NVML or a GPU.",
)
async def device_history(services: ServicesDep) -> DeviceHistory:
    history = services.telemetry_history
    return DeviceHistory(
        enabled=history.enabled,
        interval_s=history.interval_s,
        devices=[
            LaneHistory(
                id=lane,
                samples=[
                    SamplePublic(at=sample.at, **dataclasses.asdict(sample.reading))
                    for sample in samples
                ],
            )
            for lane, samples in history.history().items()
        ],
    )
