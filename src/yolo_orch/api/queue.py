"""GET /v1/queue: the queued jobs in the order the dispatcher would start them, each with its
position, effective priority and expected start (`jobs/queue_view.py`)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from yolo_orch.api.deps import JobServiceDep
from yolo_orch.api.schemas import JobPublic

router = APIRouter(prefix="/v1/queue", tags=["jobs"])

QUEUE_PAGE_MAX = 500


class QueuedJob(BaseModel):
    position: int = Field(description="1: the next job to start.")
    effective_priority: int = Field(
        description="Its priority plus `priority_aging_per_minute` for each minute it has "
        "waited (rounded down): what orders the queue."
    )
    expected_wait_s: float = Field(
        description="Until it is expected to start: what is left of the running jobs plus a "
        "typical run of each job before it, over the lanes' slots (the estimate a 429's "
        "`Retry-After` says of a new job). A guess from recent run times, not a promise."
    )
    expected_start_at: datetime
    job: JobPublic


class QueuePublic(BaseModel):
    at: datetime = Field(description="When it was read: the effective priorities are of then.")
    queued: int = Field(
        description="Every queued job, those left out of `jobs` included: jobs waiting for "
        "others (`after`, `after_ok`) and jobs needing more lanes than are healthy."
    )
    jobs: list[QueuedJob] = Field(description="In start order, `limit` at most.")


@router.get("", response_model=QueuePublic, summary="The queue, in start order")
async def queue(
    jobs: JobServiceDep,
    limit: Annotated[int, Query(ge=1, le=QUEUE_PAGE_MAX)] = 100,
) -> QueuePublic:
    view = await jobs.queue(limit)
    return QueuePublic(
        at=view.at,
        queued=view.queued,
        jobs=[
            QueuedJob(
                position=position,
                effective_priority=entry.effective_priority,
                expected_wait_s=round(entry.expected_wait_s, 1),
                expected_start_at=view.at + timedelta(seconds=entry.expected_wait_s),
                job=JobPublic.of(entry.job),
            )
            for position, entry in enumerate(view.entries, start=1)
        ],
    )
