"""Runners resolve a warm model from the registry's kept answers, in their own thread, and never
from an answer that a change to the registry has made stale."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import anyio.to_thread
import pytest

from yolo_orch.domain import Model
from yolo_orch.domain.variants import Variant
from yolo_orch.errors import ModelUnusable
from yolo_orch.registry.models import ModelRegistry
from yolo_orch.registry.weights import CheckpointInfo
from yolo_orch.runners.variant_check import check_on_cpu
from yolo_orch.runners.yolo import RegistryAccess
from yolo_orch.store.memory_models import InMemoryModelStore


class CountingStore(InMemoryModelStore):
    """Counts the reads behind resolutions; `stall_get` holds the next one until released."""

    def __init__(self) -> None:
        super().__init__()
        self.gets = 0
        self.variant_lists = 0
        self.stall_get: asyncio.Event | None = None
        self.get_started = asyncio.Event()

    async def get(self, ref: str) -> Model:
        self.gets += 1
        model = await super().get(ref)
        if self.stall_get is not None:
            self.get_started.set()
            await self.stall_get.wait()
            self.stall_get = None
        return model

    async def list_variants(self, model_id: str) -> list[Variant]:
        self.variant_lists += 1
        return await super().list_variants(model_id)


def inspect(path: Path) -> CheckpointInfo:
    return CheckpointInfo(
        task="detect", class_names=("thing",), architecture=None, ultralytics_version=None
    )


async def one_model(tmp_path: Path) -> tuple[CountingStore, ModelRegistry, Model]:
    store = CountingStore()
    registry = ModelRegistry(
        store, tmp_path / "models", [], inspect, check_variant=check_on_cpu(tmp_path)
    )

    async def body() -> AsyncIterator[bytes]:
        yield b"weights"

    model, _ = await registry.import_stream(body(), name="m", source="upload", max_bytes=99)
    return store, registry, model


async def test_a_warm_resolve_is_answered_in_the_runners_thread(tmp_path: Path) -> None:
    store, registry, model = await one_model(tmp_path)
    access = RegistryAccess(registry)

    first = await anyio.to_thread.run_sync(access.resolve, model.id)
    reads = store.gets
    again = await anyio.to_thread.run_sync(access.resolve, model.id)
    await anyio.to_thread.run_sync(access.resolve_variants, model.id)
    await anyio.to_thread.run_sync(access.resolve_variants, model.id)

    assert again == first
    assert store.gets == reads
    assert store.variant_lists == 1


async def test_a_model_marked_unusable_is_never_resolved_from_a_kept_answer(
    tmp_path: Path,
) -> None:
    _, registry, model = await one_model(tmp_path)
    access = RegistryAccess(registry)
    await anyio.to_thread.run_sync(access.resolve, model.id)

    await registry.mark_unusable(model.id)

    with pytest.raises(ModelUnusable):
        await anyio.to_thread.run_sync(access.resolve, model.id)


async def test_an_answer_read_across_a_change_is_not_kept(tmp_path: Path) -> None:
    store, registry, model = await one_model(tmp_path)
    store.stall_get = release = asyncio.Event()

    resolving = asyncio.create_task(registry.resolve(model.id))
    await store.get_started.wait()
    await registry.mark_unusable(model.id)  # after the read, before its answer
    release.set()
    await resolving  # read before the change: usable

    assert registry.resolutions.model(model.id) is None
    with pytest.raises(ModelUnusable):
        await registry.resolve(model.id)
