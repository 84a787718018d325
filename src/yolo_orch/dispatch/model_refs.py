"""A job's model, as its start finds it: a model named by alias (`name@alias`) or by the job
that produces it (`job:<id>`, a chain's step) is resolved when the job starts, and the claim
records the model it resolved to (`Job.model_id`). Jobs naming a model directly pass as they
are, with no read."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace

from yolo_orch.domain import Job, JobError, JobState, Outcome
from yolo_orch.domain.chains import producer_of
from yolo_orch.errors import ErrorCode, JobAlreadyFinished, ModelNotFound, YoloOrchError
from yolo_orch.ops.clock import utcnow
from yolo_orch.ops.logs import for_job
from yolo_orch.store.base import JobStore

log = logging.getLogger(__name__)

ResolveModel = Callable[[str], Awaitable[str]]
"""A model reference (`name@alias`, a name or an id) -> the id of the registry model it names
now; raises (a `YoloOrchError`) when it names none."""


async def no_models(ref: str) -> str:
    raise ModelNotFound(ref)


def is_deferred(model: str) -> bool:
    """Whether a job's model reference is resolved at its start rather than at submission."""
    return "@" in model or producer_of(model) is not None


class ModelRefs:
    def __init__(self, store: JobStore, resolve_model: ResolveModel) -> None:
        self._store = store
        self._resolve_model = resolve_model

    async def at_start(self, jobs: Sequence[Job]) -> tuple[list[Job], list[tuple[Job, JobError]]]:
        """`jobs`, about to start together, each with the model its reference names now; and
        those whose reference names none, with why. A reference shared by several is resolved
        once, so jobs sharing a forward pass run one model."""
        resolved: dict[str, str | JobError] = {}
        ready: list[Job] = []
        refused: list[tuple[Job, JobError]] = []
        for job in jobs:
            if not is_deferred(job.model):
                ready.append(job)
                continue
            if job.model not in resolved:
                resolved[job.model] = await self._resolve(job.model)
            model_id = resolved[job.model]
            if isinstance(model_id, JobError):
                refused.append((job, model_id))
            else:
                ready.append(replace(job, model_id=model_id))
        return ready, refused

    async def fail(self, refused: Sequence[tuple[Job, JobError]]) -> None:
        """End the jobs whose references named no model, failed with why, without a run."""
        for job, error in refused:
            log.warning("job %s: %s", job.id, error.message, extra=for_job(job.id))
            with contextlib.suppress(JobAlreadyFinished):
                await self._store.finish(job.id, Outcome(JobState.FAILED, error), utcnow())

    async def _resolve(self, ref: str) -> str | JobError:
        producer = producer_of(ref)
        try:
            if producer is None:
                return await self._resolve_model(ref)
            job = await self._store.get(producer)
            model_id = (job.result or {}).get("model_id")
            if not isinstance(model_id, str):
                return JobError(ErrorCode.MODEL_NOT_FOUND, f"job {producer} produced no model")
            return await self._resolve_model(model_id)  # not deleted since
        except YoloOrchError as exc:
            return JobError(exc.code, exc.message)
