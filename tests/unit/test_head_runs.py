"""Jobs that run on the server: an outcome whose write fails is retried, as a lane's runs' are,
so a promotion is not left `running` until the next restart by one failed write."""

from __future__ import annotations

import asyncio
from datetime import datetime

from tests.support.stores import ROOMY, T0, new_job
from yolo_orch.dispatch.head_runs import HeadRuns
from yolo_orch.dispatch.model_refs import ModelRefs, no_models
from yolo_orch.domain import Job, JobKind, JobResult, JobState, Outcome
from yolo_orch.store.memory import InMemoryDatabase, InMemoryJobStore


class FailsFirstFinish(InMemoryJobStore):
    def __init__(self) -> None:
        super().__init__(InMemoryDatabase())
        self.finish_calls = 0

    async def finish(self, job_id: str, outcome: Outcome, now: datetime) -> Job:
        self.finish_calls += 1
        if self.finish_calls == 1:
            raise OSError("database is locked")
        return await super().finish(job_id, outcome, now)


async def test_an_outcome_whose_write_fails_is_written_again() -> None:
    store = FailsFirstFinish()
    job, _ = await store.create(
        new_job(kind=JobKind.PROMOTE, model="m", spec={"alias": "m@prod"}),
        max_queued=ROOMY,
        now=T0,
    )

    async def promote(claimed: Job) -> JobResult:
        return JobResult(summary={"promoted": True})

    ended = asyncio.Event()
    runs = HeadRuns(store, {JobKind.PROMOTE: promote})
    runs.start(job, ModelRefs(store, no_models), ended.set)
    await asyncio.wait_for(ended.wait(), timeout=30)

    done = await store.get(job.id)
    assert (done.state, done.result, store.finish_calls) == (
        JobState.SUCCEEDED,
        {"promoted": True},
        2,
    )
