"""A job's model as its start finds it (`dispatch/model_refs.py`): aliases and a chain's produced
model resolved once per reference, and the references that name nothing refused with why."""

from __future__ import annotations

from tests.support.stores import T0, add, running
from yolo_orch.dispatch.model_refs import ModelRefs
from yolo_orch.domain import JobState, Outcome
from yolo_orch.domain.chains import produced_by
from yolo_orch.errors import ErrorCode, ModelNotFound
from yolo_orch.store.memory import InMemoryJobStore

MODELS = {"m-1": "m-1", "det@prod": "m-1", "det@next": "m-2"}


async def test_references_resolve_once_each_and_direct_models_pass_unread() -> None:
    store = InMemoryJobStore()
    asked: list[str] = []

    async def resolve(ref: str) -> str:
        asked.append(ref)
        if ref not in MODELS:
            raise ModelNotFound(ref)
        return MODELS[ref]

    training = await running(store)
    await store.finish(training.id, Outcome(JobState.SUCCEEDED, result={"model_id": "m-1"}), T0)
    gone = await running(store)
    await store.finish(gone.id, Outcome(JobState.SUCCEEDED, result={"model_id": "m-9"}), T0)
    nothing = await running(store)
    await store.finish(nothing.id, Outcome(JobState.SUCCEEDED, result={"model_id": None}), T0)
    jobs = [
        await add(store, model="det@prod"),
        await add(store, model="det@prod"),
        await add(store, model="yolo11n"),
        await add(store, model=produced_by(training.id)),
        await add(store, model=produced_by(gone.id)),
        await add(store, model=produced_by(nothing.id)),
        await add(store, model="det@none"),
    ]

    ready, refused = await ModelRefs(store, resolve).at_start(jobs)

    assert [(job.model, job.model_id) for job in ready] == [
        ("det@prod", "m-1"),
        ("det@prod", "m-1"),
        ("yolo11n", None),
        (produced_by(training.id), "m-1"),
    ]
    assert asked.count("det@prod") == 1  # once for the jobs starting together
    assert "yolo11n" not in asked
    errors = {job.model: error for job, error in refused}
    assert errors[produced_by(gone.id)].code == ErrorCode.MODEL_NOT_FOUND  # deleted since
    assert "produced no model" in errors[produced_by(nothing.id)].message
    assert errors["det@none"].code == ErrorCode.MODEL_NOT_FOUND
