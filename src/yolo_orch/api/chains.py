"""/v1/chains: a training's chain (`then`) as one thing: its steps in order, where it stands,
whether it promoted, and a cancel of whatever has not run."""

from __future__ import annotations

import contextlib
from typing import Annotated, Literal

from fastapi import APIRouter, Path

from yolo_orch.api.deps import JobServiceDep
from yolo_orch.api.problems import problem_responses
from yolo_orch.api.schemas import ChainPublic, JobPublic
from yolo_orch.domain import Job, JobFilter, JobKind, JobState
from yolo_orch.errors import JobAlreadyFinished, JobNotFound
from yolo_orch.jobs.service import JobService

router = APIRouter(prefix="/v1/chains", tags=["chains"])

ChainId = Annotated[str, Path(description="The chain's id: its training's job id.", max_length=64)]
_MOST_STEPS = 64
"""More than a chain can have: a training, a validation, 4 exports, a baseline, a promotion."""


@router.get(
    "/{chain_id}",
    response_model=ChainPublic,
    summary="Get a chain",
    responses=problem_responses(404),
)
async def get_chain(chain_id: ChainId, jobs: JobServiceDep) -> ChainPublic:
    return _public(chain_id, await _steps(jobs, chain_id))


@router.post(
    "/{chain_id}/cancel",
    response_model=ChainPublic,
    summary="Cancel a chain",
    description="Every step not yet ended is cancelled: queued ones at once, a running one at "
    "its next safe point (as POST /v1/jobs/{id}/cancel). Steps that ended stay as they are.",
    responses=problem_responses(404),
)
async def cancel_chain(chain_id: ChainId, jobs: JobServiceDep) -> ChainPublic:
    steps = await _steps(jobs, chain_id)
    for step in reversed(steps):  # the last first: none is released by an earlier one's end
        if not step.state.is_terminal:
            with contextlib.suppress(JobAlreadyFinished):
                await jobs.cancel(step.id)
    return _public(chain_id, await _steps(jobs, chain_id))


async def _steps(jobs: JobService, chain_id: str) -> list[Job]:
    page = await jobs.list_jobs(JobFilter(chain_id=chain_id), limit=_MOST_STEPS, before_seq=None)
    if not page.jobs:
        raise JobNotFound(chain_id)
    return sorted(page.jobs, key=lambda job: job.seq)


def _public(chain_id: str, steps: list[Job]) -> ChainPublic:
    states = {step.state for step in steps}
    state: Literal["queued", "running", "succeeded", "failed", "cancelled"]
    if JobState.RUNNING in states:
        state = "running"
    elif JobState.QUEUED in states:
        state = "queued"
    elif states == {JobState.SUCCEEDED}:
        state = "succeeded"
    elif JobState.FAILED in states:
        state = "failed"
    else:
        state = "cancelled"
    promotion = next((step for step in steps if step.kind is JobKind.PROMOTE), None)
    promoted = None
    if promotion is not None and promotion.result is not None:
        promoted = bool(promotion.result.get("promoted"))
    return ChainPublic(
        id=chain_id, state=state, promoted=promoted, steps=[JobPublic.of(s) for s in steps]
    )
