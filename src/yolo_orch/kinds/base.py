"""What a job kind is: everything the server knows of one kind, in one value that its own module
builds (`yolo_orch.kinds.inference`, ...) and the table `yolo_orch.kinds.KINDS` holds.

A kind has a typed spec (`domain.specs`), a params model (`yolo_orch.params`), the API's request
body, the checks of a submission (`checked`), and what the dispatcher and
the Ray executor must know of it. Its runner is the runtime's (`Runtime.runner(kind)`: each
runtime holds one per kind, by the kind's name)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from yolo_orch.domain import SIM_MODEL, Job, JobKind, NewJob
from yolo_orch.domain.chains import MAX_DEPENDENCIES, Dependency
from yolo_orch.domain.specs import JobSpec
from yolo_orch.domain.webhooks import WebhookEvent, WebhookTarget, events_of
from yolo_orch.kinds.submission import Submission, SubmissionChecks
from yolo_orch.params.chains import ThenSteps
from yolo_orch.params.common import SIM_FIELDS, JobParams


class WebhookRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str = Field(
        pattern=r"^https?://",
        max_length=2048,
        description="Where to POST the job's events, signed (Standard Webhooks); its host must "
        "be in the server's `webhook_allowed_hosts`.",
    )
    events: list[WebhookEvent | Literal["completed"]] = Field(
        default_factory=list,
        max_length=len(WebhookEvent) + 1,
        description="The events to send (`completed`: every end); empty: all.",
    )

    def target(self) -> WebhookTarget:
        return WebhookTarget(self.url, events_of(self.events))


class JobRequest(BaseModel):
    """What every kind's request body holds (POST /v1/jobs); the kinds' are told apart by `kind`.
    Pydantic only, so the OpenAPI document shows each kind's fields from its own class."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(
        min_length=1,
        max_length=264,
        description="A registered model (name or id), or `name@alias`: the model the alias "
        "points to when the job starts.",
    )
    priority: int = Field(default=0, ge=-100, le=100, description="Higher starts first.")
    kind: str
    after: list[str] = Field(
        default_factory=list,
        max_length=MAX_DEPENDENCIES,
        description="Job ids this job waits for (queued) until each has ended, however.",
    )
    after_ok: list[str] = Field(
        default_factory=list,
        max_length=MAX_DEPENDENCIES,
        description="Job ids this job waits for until each has succeeded; if one does not, "
        "this job is cancelled (`dependency_failed`).",
    )
    unique_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=255,
        description="While a job with this key is queued or running (and was submitted less "
        "than `unique_for_s` ago), a submission with it returns that job instead.",
    )
    unique_for_s: float = Field(
        default=3600, gt=0, le=31 * 24 * 3600, description="The window of `unique_key`."
    )
    webhook: WebhookRequest | None = None

    @model_validator(mode="after")
    def _simulated_fields_need_sim_model(self) -> JobRequest:
        params: JobParams = getattr(self, "params")  # noqa: B009 - every kind's has it
        # A kind that never runs on a lane (promote) has no simulated fields.
        used = [name for name in SIM_FIELDS if getattr(params, name, None) is not None]
        if used and self.model != SIM_MODEL:
            raise ValueError(f"{', '.join(used)} apply to model {SIM_MODEL!r} only")
        return self

    def spec(self) -> JobSpec:
        """The job's spec, as the store will keep it."""
        raise NotImplementedError

    def lanes(self) -> int:
        """The lanes the job holds for its whole run."""
        return 1

    @model_validator(mode="after")
    def _waits_once_for_each(self) -> JobRequest:
        if len({*self.after, *self.after_ok}) < len(self.after) + len(self.after_ok):
            raise ValueError("a job id appears twice in after/after_ok")
        if len(self.after) + len(self.after_ok) > MAX_DEPENDENCIES:
            raise ValueError(f"a job waits for {MAX_DEPENDENCIES} jobs at most")
        return self

    def to_new_job(self, max_attempts: int, idempotency_key: str | None) -> NewJob:
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return NewJob(
            kind=JobKind(self.kind),
            model=self.model,
            spec=self.spec(),
            priority=self.priority,
            gpus=self.lanes(),
            max_attempts=max_attempts,
            idempotency_key=idempotency_key,
            request_fingerprint=hashlib.sha256(canonical.encode()).hexdigest(),
            after=(
                *(Dependency(job_id) for job_id in self.after),
                *(Dependency(job_id, ok_only=True) for job_id in self.after_ok),
            ),
            unique_key=self.unique_key,
            unique_for_s=self.unique_for_s,
            webhook=None if self.webhook is None else self.webhook.target(),
        )

    def steps(self) -> ThenSteps | None:
        """The chain this job starts once it succeeds (a training's `then`)."""
        return None


def _never_batched(job: Job) -> Hashable | None:
    return None


def _one_pass_item(job: Job) -> int:
    return 1


@dataclass(frozen=True)
class Kind:
    name: JobKind
    params: type[JobParams]
    """What its `params` may hold: the request's, the runner's and GET /v1/meta's one model."""
    request: type[JobRequest]
    """The API's request body (POST /v1/jobs, `kind` = `name`)."""
    result: type[BaseModel]
    """The detail of its result (GET /v1/jobs/{id}/result): a member of the domain's
    `JobResultDetail`, which the client reads without this package."""
    checked: Callable[[Submission[Any], SubmissionChecks], Awaitable[JobSpec]]
    """The submission's spec once this host has checked what could only fail later (formats,
    datasets, output names, buildable exports), with what the checks resolved added (`files`,
    `dataset_path`). Raises `InvalidJob` and the like to refuse it."""
    batch_key: Callable[[Job], Hashable | None] = _never_batched
    """What jobs must have in common to share a forward pass; None for one that never does."""
    images: Callable[[Job], int] = _one_pass_item
    """What a job puts through a shared forward pass (its images)."""
    warm_lane_actor: bool = False
    """Ray: a one-lane job runs in its lane's long-lived actor (its models stay loaded); other
    kinds get an actor of their own."""
    ships_inputs: bool = False
    """Ray: the server sends the job's input files (and the variant that runs them) with it."""
    stream_fps: Callable[[Job], float] | None = None
    """A live stream's: the frames per second it asks of its lane. Such a job holds a stream
    share of a lane, not a turn (`Lanes.try_admit_stream`), runs until it ends or is cancelled,
    and a restart of the server is not one of its attempts. None: a job that takes a turn."""
    on_head: bool = False
    """Runs on the server itself, between jobs, taking no lane (a chain's promotion): the
    dispatcher runs it (`dispatch/head_runs.py`); the runtimes have no runner for it."""
    resumes: bool = False
    """An on-head job that supervises others (a tune's trials) for as long as they run: a
    restart of the server is not one of its attempts (it resumes from what the store holds),
    and a drain stops it at once, leaving it running for the next start."""
