"""One contract for every `ModelStore`, with the `JobStore` on the same database: the checks
that span both (a job's model, a model's jobs) must hold in memory as in SQLite."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.postgres import ENGINES, migrated_url
from tests.support.stores import ROOMY, T0, new_job, open_database
from yolo_orch.domain import JobFilter, JobState, Model, NewModel, Outcome
from yolo_orch.domain.variants import ExportFormat, Lineage, NewVariant
from yolo_orch.errors import (
    ModelHasVariants,
    ModelInUse,
    ModelNameTaken,
    ModelNotFound,
    VariantNotFound,
)
from yolo_orch.store.base import JobStore, ModelStore
from yolo_orch.store.memory import InMemoryDatabase, InMemoryJobStore
from yolo_orch.store.memory_models import InMemoryModelStore
from yolo_orch.store.sql_jobs import SqlJobStore
from yolo_orch.store.sql_models import SqlModelStore


@dataclass(frozen=True)
class Stores:
    jobs: JobStore
    models: ModelStore


@pytest.fixture(params=ENGINES)
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    if request.param == "memory":
        memory = InMemoryDatabase()
        yield Stores(InMemoryJobStore(memory), InMemoryModelStore(memory))
        return
    url = await migrated_url(request.param, request, tmp_path)
    async with open_database(url) as db:
        yield Stores(SqlJobStore(db), SqlModelStore(db))


def new_model(name: str = "detector", sha256: str = "a" * 64, **changes: Any) -> NewModel:
    model = NewModel(
        name=name,
        sha256=sha256,
        size_bytes=5_400_000,
        task="detect",
        class_names=("person", "bicycle"),
        source="upload",
        file_name=f"{sha256}.pt",
    )
    return replace(model, **changes)


async def register(stores: Stores, name: str, sha256: str, now: Any = T0) -> Model:
    model, created = await stores.models.add(new_model(name, sha256), now)
    assert created
    return model


async def submit(stores: Stores, model: Model) -> str:
    job, _ = await stores.jobs.create(
        new_job(model=model.name, model_id=model.id), max_queued=ROOMY, now=T0
    )
    return job.id


async def all_jobs(stores: Stores) -> int:
    return len((await stores.jobs.list_jobs(JobFilter(), limit=100, before_seq=None)).jobs)


async def test_add_then_get_by_id_and_by_name(stores: Stores) -> None:
    model, created = await stores.models.add(new_model(), T0)

    assert created
    assert (model.name, model.sha256, model.size_bytes, model.task) == (
        "detector",
        "a" * 64,
        5_400_000,
        "detect",
    )
    assert (model.class_names, model.source, model.file_name) == (
        ("person", "bicycle"),
        "upload",
        f"{'a' * 64}.pt",
    )
    assert model.usable
    assert model.created_at == T0
    assert model.created_at.utcoffset() == timedelta(0)
    assert await stores.models.get(model.id) == model
    assert await stores.models.get("detector") == model
    with pytest.raises(ModelNotFound):
        await stores.models.get("no-such-model")


async def test_the_same_weights_twice_are_one_model(stores: Stores) -> None:
    first = await register(stores, "detector", "a" * 64)

    again, created = await stores.models.add(new_model("other-name", "a" * 64), T0)

    assert not created
    assert again == first
    assert await stores.models.list_models() == [first]


async def test_a_name_used_by_other_weights_is_refused(stores: Stores) -> None:
    first = await register(stores, "detector", "a" * 64)

    with pytest.raises(ModelNameTaken) as raised:
        await stores.models.add(new_model("detector", "b" * 64), T0)

    assert raised.value.name == "detector"
    assert await stores.models.list_models() == [first]


async def test_list_models_newest_first(stores: Stores) -> None:
    old = await register(stores, "old", "1" * 64, T0)
    newer = await register(stores, "newer", "2" * 64, T0 + timedelta(minutes=2))
    newest = await register(stores, "newest", "3" * 64, T0 + timedelta(minutes=2))
    middle = await register(stores, "middle", "4" * 64, T0 + timedelta(minutes=1))

    # At one instant, the one registered later comes first.
    assert await stores.models.list_models() == [newest, newer, middle, old]


async def test_delete_by_name_or_id(stores: Stores) -> None:
    by_name = await register(stores, "by-name", "1" * 64)
    by_id = await register(stores, "by-id", "2" * 64)

    assert await stores.models.delete("by-name") == by_name
    assert await stores.models.delete(by_id.id) == by_id

    assert await stores.models.list_models() == []
    for ref in ("by-name", by_id.id):
        with pytest.raises(ModelNotFound):
            await stores.models.get(ref)
        with pytest.raises(ModelNotFound):
            await stores.models.delete(ref)
    # A name is free again once its model is gone.
    await register(stores, "by-name", "3" * 64)


async def test_delete_is_refused_while_queued_or_running_jobs_use_the_model(
    stores: Stores,
) -> None:
    model = await register(stores, "detector", "a" * 64)
    other = await register(stores, "other", "b" * 64)
    running = await submit(stores, model)
    queued = await submit(stores, model)
    cancelled = await submit(stores, model)
    await submit(stores, other)
    await stores.jobs.claim(running, ("sim:0",), T0)
    await stores.jobs.cancel(cancelled, T0)

    with pytest.raises(ModelInUse) as raised:
        await stores.models.delete("detector")

    assert (raised.value.ref, raised.value.job_ids) == ("detector", [running, queued])
    assert await stores.models.get(model.id) == model
    await stores.jobs.finish(running, Outcome(JobState.SUCCEEDED), T0)
    await stores.jobs.cancel(queued, T0)

    assert await stores.models.delete("detector") == model

    # Finished jobs stay, no longer pointing at the model that is gone.
    for job_id in (running, queued, cancelled):
        assert (await stores.jobs.get(job_id)).model_id is None
    assert await all_jobs(stores) == 4


async def test_a_job_records_its_model(stores: Stores) -> None:
    model = await register(stores, "detector", "a" * 64)

    job_id = await submit(stores, model)

    assert (await stores.jobs.get(job_id)).model_id == model.id
    claimed = await stores.jobs.claim(job_id, ("sim:0",), T0)
    assert claimed is not None
    assert claimed.model_id == model.id


async def test_a_job_for_a_deleted_model_is_refused_and_not_stored(stores: Stores) -> None:
    model = await register(stores, "detector", "a" * 64)
    await stores.models.delete(model.id)

    with pytest.raises(ModelNotFound) as raised:
        await submit(stores, model)

    assert raised.value.model == model.id
    assert await all_jobs(stores) == 0


async def test_mark_unusable_refuses_new_jobs_but_keeps_the_model_listed(stores: Stores) -> None:
    model = await register(stores, "detector", "a" * 64)
    queued = await submit(stores, model)

    await stores.models.mark_unusable(model.id)

    assert await stores.models.get("detector") == replace(model, usable=False)
    assert await stores.models.list_models() == [replace(model, usable=False)]
    with pytest.raises(ModelNotFound):
        await submit(stores, model)
    assert await all_jobs(stores) == 1
    assert (await stores.jobs.get(queued)).model_id == model.id
    with pytest.raises(ModelNotFound):
        await stores.models.mark_unusable("no-such-model")


async def test_concurrent_adds_of_the_same_weights_make_one_model(stores: Stores) -> None:
    results = await asyncio.gather(
        *(stores.models.add(new_model(f"name-{i}", "a" * 64), T0) for i in range(50))
    )

    assert len({model.id for model, _ in results}) == 1
    assert sum(created for _, created in results) == 1
    assert len(await stores.models.list_models()) == 1


@pytest.mark.parametrize("delete_at", [0, 10, 20])
async def test_a_delete_racing_submissions_never_orphans_a_job(
    stores: Stores, delete_at: int
) -> None:
    model = await register(stores, "detector", "a" * 64)
    racers = [submit(stores, model) for _ in range(20)]
    racers.insert(delete_at, stores.models.delete(model.id))

    outcomes = await asyncio.gather(*racers, return_exceptions=True)

    refusals = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
    assert all(isinstance(refusal, ModelInUse | ModelNotFound) for refusal in refusals)
    job_ids = [outcome for outcome in outcomes if isinstance(outcome, str)]
    jobs = [await stores.jobs.get(job_id) for job_id in job_ids]
    deleted = outcomes[delete_at] == model
    # Either the model is gone and no job was queued for it, or it stays with all its jobs.
    if deleted:
        assert jobs == []
    else:
        assert [job.model_id for job in jobs] == [model.id] * 20
        assert await stores.models.get(model.id) == model
    # The delete wins only when it got the write lock before any submission did.
    assert deleted is (delete_at == 0)


def new_variant(model: Model, sha256: str = "e" * 64, **changes: Any) -> NewVariant:
    variant = NewVariant(
        model_id=model.id,
        format=ExportFormat.OPENVINO,
        sha256=sha256,
        size_bytes=1234,
        files={"m_openvino_model/m.xml": "1" * 64, "m_openvino_model/m.bin": "2" * 64},
        lineage=Lineage(
            source_sha256=model.sha256,
            imgsz=320,
            half=False,
            int8=False,
            dynamic=False,
            batch=1,
            device="cuda:0",
            gpu_name="NVIDIA H200",
            compute_capability="9.0",
            tensorrt_version="10.9.0",
            ultralytics_version="8.4.190",
        ),
        source="export:job-1",
        job_id="job-1",
    )
    return replace(variant, **changes)


async def test_a_variant_keeps_its_manifest_and_lineage(stores: Stores) -> None:
    model = await register(stores, "detector", "a" * 64)
    new = new_variant(model)

    variant, created = await stores.models.add_variant(new, T0)

    assert created
    assert (variant.id, variant.model_id, variant.format, variant.sha256) == (
        new.id,
        model.id,
        ExportFormat.OPENVINO,
        "e" * 64,
    )
    assert (variant.files, variant.lineage, variant.source, variant.job_id) == (
        new.files,
        new.lineage,
        "export:job-1",
        "job-1",
    )
    assert variant.usable
    assert variant.created_at == T0
    assert await stores.models.get_variant(variant.id) == variant
    assert await stores.models.list_variants(model.id) == [variant]
    with pytest.raises(VariantNotFound):
        await stores.models.get_variant("no-such-variant")


async def test_the_same_files_or_the_same_job_again_return_the_variant_registered_before(
    stores: Stores,
) -> None:
    model = await register(stores, "detector", "a" * 64)
    first, _ = await stores.models.add_variant(new_variant(model), T0)

    same_files, files_created = await stores.models.add_variant(
        new_variant(model, job_id=None, source="upload"), T0
    )
    rerun, rerun_created = await stores.models.add_variant(new_variant(model, "f" * 64), T0)
    other_format, other_created = await stores.models.add_variant(
        new_variant(model, "f" * 64, format=ExportFormat.ONNX), T0
    )

    assert (same_files, files_created) == (first, False)
    assert (rerun, rerun_created) == (first, False)
    assert other_created
    assert await stores.models.list_variants(model.id) == [other_format, first]


async def test_a_variant_of_an_unknown_model_is_refused(stores: Stores) -> None:
    model = await register(stores, "detector", "a" * 64)
    await stores.models.delete(model.id)

    with pytest.raises(ModelNotFound):
        await stores.models.add_variant(new_variant(model), T0)


async def test_variants_are_listed_per_model_newest_first(stores: Stores) -> None:
    model = await register(stores, "detector", "a" * 64)
    other = await register(stores, "other", "b" * 64)
    old, _ = await stores.models.add_variant(new_variant(model, "1" * 64, job_id="j1"), T0)
    new, _ = await stores.models.add_variant(
        new_variant(model, "2" * 64, job_id="j2"), T0 + timedelta(minutes=1)
    )
    await stores.models.add_variant(new_variant(other, "3" * 64, job_id="j3"), T0)

    assert await stores.models.list_variants(model.id) == [new, old]
    assert await stores.models.list_variants("no-such-model") == []


async def test_a_model_with_variants_is_deleted_only_with_cascade(stores: Stores) -> None:
    model = await register(stores, "detector", "a" * 64)
    variant, _ = await stores.models.add_variant(new_variant(model), T0)

    with pytest.raises(ModelHasVariants) as raised:
        await stores.models.delete("detector")

    assert raised.value.variant_ids == [variant.id]
    assert await stores.models.get(model.id) == model
    assert await stores.models.delete("detector", cascade=True) == model
    assert await stores.models.list_variants(model.id) == []
    with pytest.raises(VariantNotFound):
        await stores.models.get_variant(variant.id)


async def test_a_variant_is_marked_unusable_or_deleted_alone(stores: Stores) -> None:
    model = await register(stores, "detector", "a" * 64)
    variant, _ = await stores.models.add_variant(new_variant(model), T0)

    await stores.models.mark_variant_unusable(variant.id, "it failed 3 jobs")

    retired = replace(variant, usable=False, unusable_reason="it failed 3 jobs")
    assert await stores.models.get_variant(variant.id) == retired
    assert await stores.models.delete_variant(variant.id) == retired
    assert await stores.models.list_variants(model.id) == []
    assert await stores.models.delete("detector") == model
    with pytest.raises(VariantNotFound):
        await stores.models.mark_variant_unusable(variant.id, "gone")
    with pytest.raises(VariantNotFound):
        await stores.models.delete_variant(variant.id)


async def test_deleting_or_expiring_jobs_keeps_their_models(stores: Stores) -> None:
    model = await register(stores, "detector", "a" * 64)
    job_ids = [await submit(stores, model) for _ in range(2)]
    for job_id in job_ids:
        await stores.jobs.claim(job_id, ("sim:0",), T0)
        await stores.jobs.finish(job_id, Outcome(JobState.SUCCEEDED), T0)

    await stores.jobs.delete(job_ids[0])
    await stores.jobs.expire(finished_before=T0 + timedelta(days=1), keep=None, limit=10)

    assert await all_jobs(stores) == 0
    assert await stores.models.get(model.id) == model
    assert await submit(stores, model)  # and it still takes jobs
