"""The model registry's files: a registered model always keeps its file, whatever the order in
which concurrent imports and deletes of the same bytes run. No ultralytics here: `inspect` is a
stand-in."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import pytest

from yolo_orch.domain import Model, NewModel
from yolo_orch.errors import InvalidJob, ModelNameTaken, ModelNotFound, ModelUnusable
from yolo_orch.registry.models import ModelRegistry
from yolo_orch.registry.weights import CheckpointInfo
from yolo_orch.runners.variant_check import check_on_cpu
from yolo_orch.store.memory_models import InMemoryModelStore

WAIT = 0.3
"""How long a stalled store call waits for the other side of a race. With the registry's lock
the other side cannot get there until this call is done, so the wait times out and the call
goes on; without the lock it comes at once and the bad interleaving happens."""


def fake_inspect(path: Path) -> CheckpointInfo:
    return CheckpointInfo(
        task="detect", class_names=("thing",), architecture=None, ultralytics_version=None
    )


async def chunks(data: bytes) -> AsyncIterator[bytes]:
    yield data


async def wait_a_little(event: asyncio.Event) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), WAIT)


class RacingStore(InMemoryModelStore):
    """Stalls chosen calls until another call has started, to force an interleaving."""

    def __init__(self) -> None:
        super().__init__()
        self.taken_adding = asyncio.Event()
        self.free_adding = asyncio.Event()
        self.taken_done = asyncio.Event()
        self.deleted = asyncio.Event()
        self.readded = asyncio.Event()
        self.stall = False

    async def add(self, new: NewModel, now: datetime) -> tuple[Model, bool]:
        if not self.stall:
            return await super().add(new, now)
        if new.name == "taken":
            self.taken_adding.set()
            await wait_a_little(self.free_adding)
            try:
                return await super().add(new, now)
            finally:
                self.taken_done.set()
        if new.name == "free":
            self.free_adding.set()
            await wait_a_little(self.taken_done)
        try:
            return await super().add(new, now)
        finally:
            self.readded.set()

    async def delete(self, ref: str, *, cascade: bool = False) -> Model:
        model = await super().delete(ref, cascade=cascade)
        if self.stall:
            self.deleted.set()
            await wait_a_little(self.readded)
        return model


def registry(store: InMemoryModelStore, tmp_path: Path) -> ModelRegistry:
    return ModelRegistry(
        store, tmp_path / "models", [], fake_inspect, check_variant=check_on_cpu(tmp_path)
    )


async def test_a_refused_import_keeps_the_file_a_concurrent_import_registered(
    tmp_path: Path,
) -> None:
    store = RacingStore()
    models = registry(store, tmp_path)
    await models.import_stream(chunks(b"other bytes"), name="taken", source="upload", max_bytes=99)
    store.stall = True

    async def after_taken_is_adding() -> AsyncIterator[bytes]:
        await wait_a_little(store.taken_adding)  # the refused import goes first
        yield b"same bytes"

    refused, accepted = await asyncio.gather(
        models.import_stream(chunks(b"same bytes"), name="taken", source="upload", max_bytes=99),
        models.import_stream(after_taken_is_adding(), name="free", source="upload", max_bytes=99),
        return_exceptions=True,
    )

    assert isinstance(refused, ModelNameTaken)
    assert isinstance(accepted, tuple)
    model, created = accepted
    assert created
    assert model.name == "free"
    assert models.path_of(model).read_bytes() == b"same bytes"
    assert not list((tmp_path / "models").glob(".incoming-*"))


async def test_a_delete_keeps_the_file_a_concurrent_import_registered_again(
    tmp_path: Path,
) -> None:
    store = RacingStore()
    models = registry(store, tmp_path)
    old, _ = await models.import_stream(chunks(b"bytes"), name="old", source="upload", max_bytes=9)
    store.stall = True

    async def import_once_deleted() -> Model:
        await wait_a_little(store.deleted)
        model, _ = await models.import_stream(
            chunks(b"bytes"), name="new", source="upload", max_bytes=9
        )
        return model

    deleted, new = await asyncio.gather(models.delete(old.id), import_once_deleted())

    assert deleted.id == old.id
    assert [model.name for model in store.models] == ["new"]
    assert models.path_of(new).read_bytes() == b"bytes"


async def test_deleting_the_only_model_of_some_bytes_removes_its_file(tmp_path: Path) -> None:
    models = registry(InMemoryModelStore(), tmp_path)
    model, _ = await models.import_stream(chunks(b"x"), name="m", source="upload", max_bytes=9)

    await models.delete("m")

    assert not models.path_of(model).exists()


async def test_resolve_refuses_an_unusable_model_as_unusable(tmp_path: Path) -> None:
    models = registry(InMemoryModelStore(), tmp_path)
    model, _ = await models.import_stream(chunks(b"x"), name="m", source="upload", max_bytes=9)
    assert (await models.resolve("m")).path == models.path_of(model)

    await models.mark_unusable(model.id)

    with pytest.raises(ModelUnusable):
        await models.resolve("m")


async def test_a_path_import_without_a_name_gets_a_valid_one_from_the_file(tmp_path: Path) -> None:
    root = tmp_path / "weights"
    (root / "runs").mkdir(parents=True)
    (root / "runs" / "best weights (v2).pt").write_bytes(b"x")
    models = ModelRegistry(
        InMemoryModelStore(),
        tmp_path / "models",
        [root],
        fake_inspect,
        check_variant=check_on_cpu(tmp_path),
    )

    model, _ = await models.import_path("runs/best weights (v2).pt", name=None)

    assert model.name == "best-weights-v2"
    assert (await models.get("best-weights-v2")).id == model.id


async def _named(models: ModelRegistry, *names: str) -> None:
    for index, name in enumerate(names):
        data = str(index).encode()
        await models.import_stream(chunks(data), name=name, source="upload", max_bytes=9)


async def test_a_model_not_found_suggests_the_close_names_of_the_registry(tmp_path: Path) -> None:
    models = registry(InMemoryModelStore(), tmp_path)
    await _named(models, "yolo11n", "yolo11s", "coco-seg", "yolo11n-pose")

    with pytest.raises(ModelNotFound) as refused:
        await models.get("yolo11n.pt")

    assert refused.value.code == "model_not_found"
    assert "did you mean 'yolo11n'" in refused.value.message
    assert "coco-seg" not in refused.value.message


async def test_a_model_not_found_lists_at_most_five_close_names(tmp_path: Path) -> None:
    models = registry(InMemoryModelStore(), tmp_path)
    await _named(models, *(f"yolo11n-{n}" for n in range(8)))

    with pytest.raises(ModelNotFound) as refused:
        await models.delete("yolo11n-")

    suggested = refused.value.message.partition("did you mean ")[2]
    assert suggested.count("'yolo11n-") == 5


async def test_a_model_not_found_without_close_names_says_how_many_there_are(
    tmp_path: Path,
) -> None:
    models = registry(InMemoryModelStore(), tmp_path)
    await _named(models, "alpha", "beta")

    with pytest.raises(ModelNotFound) as refused:
        await models.get("yolo11n.pt")

    assert "none of the 2 registered model(s) is close: see GET /v1/models" in str(refused.value)


async def test_a_model_not_found_in_an_empty_registry_says_how_to_import_one(
    tmp_path: Path,
) -> None:
    with pytest.raises(ModelNotFound) as refused:
        await registry(InMemoryModelStore(), tmp_path).get("yolo11n.pt")

    assert "no model is registered yet: import weights (POST /v1/models" in str(refused.value)


async def test_a_path_import_without_model_roots_names_the_setting_and_its_variable(
    tmp_path: Path,
) -> None:
    with pytest.raises(InvalidJob) as refused:
        await registry(InMemoryModelStore(), tmp_path).import_path("w.pt", name=None)

    assert refused.value.code == "no_model_roots"
    assert (
        "set model_roots in the config file or YOLO_ORCH_MODEL_ROOTS='[\"/srv/weights\"]'"
        in refused.value.message
    )
