"""Request and response shapes of the HTTP API; separate from the domain and the tables."""

from __future__ import annotations

import operator
from datetime import datetime
from functools import reduce
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, Field

from yolo_orch.domain import Job, JobKind, JobState
from yolo_orch.domain.streams import redacted
from yolo_orch.kinds import KINDS, JobRequest

if TYPE_CHECKING:
    JobCreate = JobRequest
else:
    JobCreate = Annotated[
        reduce(operator.or_, (kind.request for kind in KINDS.values())),
        Field(discriminator="kind"),
    ]
"""POST /v1/jobs's body: one kind's request (`Kind.request`), told apart by `kind`."""


class ProgressPublic(BaseModel):
    done: int
    total: int
    unit: str
    detail: dict[str, Any] | None = Field(
        default=None,
        description="Training: epoch, epochs, batch, batches and the running losses; export: "
        "`stage`; video inference: `frame_count` (`declared` or `estimated`).",
    )


class ErrorPublic(BaseModel):
    code: str
    message: str


class JobPublic(BaseModel):
    id: str
    kind: JobKind
    state: JobState
    model: str
    inputs: list[str] | None = None
    dataset: str | None = None
    split: str | None = Field(default=None, description="Validation: the split scored.")
    sources: list[str] | None = Field(
        default=None, description="Stream: its sources, credentials shown as ***."
    )
    params: dict[str, Any]
    priority: int
    gpus: int
    devices: list[str]
    attempt: int
    max_attempts: int
    cancel_requested: bool
    progress: ProgressPublic | None
    error: ErrorPublic | None
    result: dict[str, Any] | None = Field(
        description="A summary; GET /v1/jobs/{id}/result has the full result."
    )
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    model_id: str | None = Field(
        default=None,
        description="The registry model it runs: for `name@alias` or a chain's step, the one "
        "the reference named when the job started.",
    )
    waiting: bool = Field(
        default=False, description="Queued, waiting for the jobs of its `after`/`after_ok`."
    )
    chain_id: str | None = Field(
        default=None,
        description="Its chain (the training whose `then` made it): GET /v1/chains/{id}.",
    )
    parent_id: str | None = Field(default=None, description="The job whose chain made it.")
    unique_key: str | None = None
    webhook: str | None = Field(
        default=None, description="Where its events are sent (credentials shown as ***)."
    )

    @classmethod
    def of(cls, job: Job) -> JobPublic:
        return cls(
            id=job.id,
            kind=job.kind,
            state=job.state,
            model=job.model,
            **job.spec.shown(),
            params=job.params,
            priority=job.priority,
            gpus=job.gpus,
            devices=list(job.devices),
            attempt=job.attempt,
            max_attempts=job.max_attempts,
            cancel_requested=job.cancel_requested,
            progress=ProgressPublic(**job.progress.as_dict()) if job.progress else None,
            error=ErrorPublic(code=job.error.code, message=job.error.message)
            if job.error
            else None,
            result=job.result,
            created_at=job.created_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
            model_id=job.model_id,
            waiting=job.blocked,
            chain_id=job.chain_id,
            parent_id=job.parent_id,
            unique_key=job.unique_key,
            webhook=None if job.webhook is None else redacted(job.webhook.url),
        )


class ChainPublic(BaseModel):
    id: str
    state: Literal["queued", "running", "succeeded", "failed", "cancelled"] = Field(
        description="running while any step runs (queued while all wait); once all ended: "
        "succeeded if every step did, else failed if one failed, else cancelled."
    )
    promoted: bool | None = Field(
        description="The promotion's outcome (its gate's figures are in its `result`); null "
        "before it ran, or when the chain has none."
    )
    steps: list[JobPublic] = Field(description="The training first, then its steps in order.")


class JobList(BaseModel):
    jobs: list[JobPublic]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next (older) page.")


class Health(BaseModel):
    status: Literal["ok"]


class HeadState(BaseModel):
    """This head's role among the heads sharing a PostgreSQL database."""

    role: Literal["active", "standby", "lost"]
    active_url: str | None = Field(
        description="Where writes go: this head's own URL when active, the active head's on "
        "a standby (null while none is known: a takeover is under way)."
    )
    epoch: int | None = Field(description="The lease epoch this head took over with.")


class Readiness(BaseModel):
    status: Literal["ready", "degraded", "not_ready", "standby"]
    checks: dict[str, bool]
    head: HeadState | None = Field(
        default=None, description="On PostgreSQL: this head's role; null on SQLite."
    )
