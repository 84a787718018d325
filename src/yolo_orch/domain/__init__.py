"""Jobs and their lifecycle. Plain values only: no I/O, no web, SQL or torch."""

from __future__ import annotations

import enum
import math
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any, TypeVar

from yolo_orch.domain.chains import Dependency
from yolo_orch.domain.specs import (
    ExportSpec,
    InferenceSpec,
    JobSpec,
    PromoteSpec,
    SpecBase,
    StreamSpec,
    TrainingSpec,
    TuneSpec,
    ValidationSpec,
)
from yolo_orch.domain.webhooks import WebhookTarget
from yolo_orch.errors import ErrorCode, InvalidJobInput

JsonObject = dict[str, Any]

SIM_MODEL = "sim"
"""The model the simulated runtime provides: fake jobs, no weights."""


class JobKind(enum.StrEnum):
    INFERENCE = "inference"
    TRAINING = "training"
    VALIDATION = "validation"
    EXPORT = "export"
    STREAM = "stream"
    PROMOTE = "promote"
    TUNE = "tune"


SPEC_TYPES: Mapping[JobKind, type[JobSpec]] = {
    JobKind.INFERENCE: InferenceSpec,
    JobKind.TRAINING: TrainingSpec,
    JobKind.VALIDATION: ValidationSpec,
    JobKind.EXPORT: ExportSpec,
    JobKind.STREAM: StreamSpec,
    JobKind.PROMOTE: PromoteSpec,
    JobKind.TUNE: TuneSpec,
}
"""The spec of each kind (`domain.specs`): a stored row's JSON object is read with it."""

_Spec = TypeVar("_Spec", bound=SpecBase)


def spec_of(kind: JobKind, spec: JobSpec | Mapping[str, Any]) -> JobSpec:
    """`spec` as the kind's spec class: a JSON object (a stored row's, or one a test writes) is
    read with it, as is the stored form of another kind's spec (`replace(job, kind=...)`)."""
    spec_type = SPEC_TYPES[kind]
    if isinstance(spec, spec_type):
        return spec
    return spec_type.model_validate(spec if isinstance(spec, Mapping) else spec.stored())


class JobState(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in _TERMINAL

    def can_become(self, target: JobState) -> bool:
        return target in _TRANSITIONS[self]


_TERMINAL = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})

# RUNNING -> QUEUED happens only through crash recovery (see Dispatcher.recover).
_TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    JobState.QUEUED: frozenset({JobState.RUNNING, JobState.CANCELLED}),
    JobState.RUNNING: frozenset(
        {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.QUEUED}
    ),
    JobState.SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
}


@dataclass(frozen=True)
class Progress:
    done: int
    total: int
    unit: str
    detail: JsonObject | None = None
    """What else a runner can say while it runs (training: epoch, batch, running losses)."""

    def as_dict(self) -> JsonObject:
        progress = {"done": self.done, "total": self.total, "unit": self.unit}
        return progress if self.detail is None else {**progress, "detail": self.detail}


@dataclass(frozen=True)
class JobError:
    code: str
    message: str


@dataclass(frozen=True)
class NewJob:
    """What a client asked for, validated, before the store keeps it."""

    kind: JobKind
    model: str
    spec: JobSpec
    """The kind's own fields (`domain.specs`); a JSON object given here is read as the kind's
    spec (`spec_of`)."""
    priority: int = 0
    gpus: int = 1
    max_attempts: int = 3
    idempotency_key: str | None = None
    request_fingerprint: str | None = None
    model_id: str | None = None
    """The registry model the job runs (None for models a runtime provides itself, like
    `sim`). The store refuses the job if that model is gone or unusable."""
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    """Chosen before the store keeps the job, so that uploaded inputs can go to its folder."""
    after: tuple[Dependency, ...] = ()
    """Jobs it waits for (queued, unstartable) until they end (`domain.chains`)."""
    parent_id: str | None = None
    """The job whose chain (`then`) made this one, a step of it."""
    chain_id: str | None = None
    """The first job of its chain (its own id for that job); None outside a chain."""
    unique_key: str | None = None
    unique_for_s: float = 0.0
    """With `unique_key`: a job with the same key, queued or running and created less than
    `unique_for_s` ago, is returned instead of a new one (Oban's unique jobs)."""
    webhook: WebhookTarget | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "spec", spec_of(self.kind, self.spec))


@dataclass(frozen=True)
class Job:
    id: str
    seq: int
    """Submission order; ties in priority are broken by it."""
    kind: JobKind
    state: JobState
    model: str
    spec: JobSpec
    """As `NewJob.spec`: a JSON object given here (a stored row's) is read as the kind's spec."""
    priority: int
    gpus: int
    attempt: int
    max_attempts: int
    created_at: datetime
    devices: tuple[str, ...] = ()
    progress: Progress | None = None
    error: JobError | None = None
    result: JsonObject | None = None
    """A small summary; the full result lives in the job's result file."""
    cancel_requested: bool = False
    started_at: datetime | None = None
    finished_at: datetime | None = None
    idempotency_key: str | None = None
    request_fingerprint: str | None = None
    model_id: str | None = None
    """The registry model it runs: for a model named by alias (`name@alias`) or by the job
    that produces it (`job:<id>`), the one that reference named when the job started."""
    parent_id: str | None = None
    chain_id: str | None = None
    unique_key: str | None = None
    webhook: WebhookTarget | None = None
    blocked: bool = False
    """Queued, waiting for the jobs it depends on to end (`NewJob.after`)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "spec", spec_of(self.kind, self.spec))

    @property
    def params(self) -> JsonObject:
        return self.spec.params

    def spec_as(self, spec_type: type[_Spec]) -> _Spec:
        """The spec, as the kind a runner runs: a job of another kind is unusable input."""
        if not isinstance(self.spec, spec_type):
            raise InvalidJobInput(f"a {self.kind} job, not one this runner runs")
        return self.spec


@dataclass(frozen=True)
class Outcome:
    """How a run ended, as the dispatcher records it."""

    state: JobState
    error: JobError | None = None
    result: JsonObject | None = None
    progress: Progress | None = None
    kept_result: bytes | None = None
    """The full result as JSON, when it is small enough to be kept with the job; otherwise it
    is in the job's result file."""

    def __post_init__(self) -> None:
        if not self.state.is_terminal:
            raise ValueError(f"an outcome must be terminal, not {self.state}")


@dataclass(frozen=True)
class JobResult:
    """What a runner returns: a summary kept with the job and the full detail, for its result
    file or, encoded once it is known to be small (`encoded`), for the job's own record."""

    summary: JsonObject
    detail: JsonObject = field(default_factory=dict)
    encoded: bytes | None = None


@dataclass(frozen=True)
class NewModel:
    """Fingerprinted weights, already in the models folder, about to be registered."""

    name: str
    sha256: str
    size_bytes: int
    task: str
    class_names: tuple[str, ...]
    source: str
    """Where the bytes came from: `upload`, `path:<absolute path>` or `training:<job id>`."""
    file_name: str
    """The file's name inside `{data_dir}/models/`."""


@dataclass(frozen=True)
class Model:
    id: str
    name: str
    sha256: str
    size_bytes: int
    task: str
    class_names: tuple[str, ...]
    source: str
    file_name: str
    created_at: datetime
    usable: bool = True
    """False once its file no longer matched its fingerprint at load time."""


MODEL_NAME_PATTERN = r"^[A-Za-z0-9._-]*[A-Za-z0-9_-][A-Za-z0-9._-]*$"
MODEL_NAME_MAX_LENGTH = 200
"""What a model name may be, given or derived: a client must be able to address it by name, so
not dots alone ("." and ".." are a URL path's own segments)."""


def model_name_from_file(file_name: str) -> str:
    """A valid model name from a file's name, for an import that names none: its stem, each
    run of characters a name may not hold turned into one "-", cut to the longest name
    allowed; "model" when nothing of it is left."""
    stem = PurePosixPath(file_name.replace("\\", "/")).stem
    # Leading and trailing dots go too: "." or ".." could not be addressed in a URL path.
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", stem)[:MODEL_NAME_MAX_LENGTH].strip("-.")
    return name or "model"


def claimed(job: Job, devices: tuple[str, ...], now: datetime) -> Job:
    """`job` (QUEUED) as its claim onto `devices` at `now` makes it: RUNNING, in its next
    attempt."""
    return replace(
        job,
        state=JobState.RUNNING,
        devices=devices,
        attempt=job.attempt + 1,
        started_at=now,
        progress=None,
    )


def after_interruption(job: Job, *, drained: bool = False) -> tuple[JobState, JobError | None]:
    """Where a job found RUNNING after a stop goes: cancelled if that was asked, requeued while
    it has attempts left, else failed as `interrupted` (so a job that crashes the server every
    time cannot loop forever). A job a graceful drain left running (a deploy) crashed nothing:
    it is always requeued, and the store gives its attempt back."""
    if job.cancel_requested:
        return JobState.CANCELLED, None
    if drained or job.attempt < job.max_attempts:
        return JobState.QUEUED, None
    message = f"the server stopped during each of its {job.attempt} attempts"
    return JobState.FAILED, JobError(ErrorCode.INTERRUPTED, message)


@dataclass(frozen=True)
class QueueOrder:
    """How the dispatcher reads the queue: by effective priority (the job's priority plus
    `aging_per_minute` for each minute it has waited, rounded down, so no job waits forever),
    then submission order; only jobs that need at most `max_gpus` lanes, so jobs that cannot
    run now never hide the ones behind them."""

    now: datetime
    aging_per_minute: float = 0.0
    max_gpus: int | None = None

    def effective_priority(self, priority: int, created_at: datetime) -> int:
        waited_min = max(0.0, (self.now - created_at).total_seconds() / 60)
        return priority + math.floor(self.aging_per_minute * waited_min)

    def admits(self, job: Job) -> bool:
        return self.max_gpus is None or job.gpus <= self.max_gpus

    def sort(self, jobs: list[Job]) -> list[Job]:
        return sorted(
            jobs, key=lambda job: (-self.effective_priority(job.priority, job.created_at), job.seq)
        )


@dataclass(frozen=True)
class JobFilter:
    states: tuple[JobState, ...] = ()
    kinds: tuple[JobKind, ...] = ()
    chain_id: str | None = None
    """Only the jobs of this chain (its first job's id), that job included."""
    id_prefix: str | None = None
    """Only the jobs whose id starts with this (the 8 characters the dashboard shows, say)."""
    model: str | None = None
    """Only the jobs that name this model, exactly as they named it (`yolo11n.pt`,
    `detector@production`)."""

    def matches(self, job: Job) -> bool:
        """What the store's query selects, said of one job (the in-memory store filters with
        it; the dashboard's jobs list says the same of the jobs the event stream brings)."""
        return (
            (not self.states or job.state in self.states)
            and (not self.kinds or job.kind in self.kinds)
            and (self.chain_id is None or job.chain_id == self.chain_id)
            and (self.id_prefix is None or job.id.startswith(self.id_prefix))
            and (self.model is None or job.model == self.model)
        )

    def __post_init__(self) -> None:
        # Each once: a query repeating a value a thousand times asks for nothing more.
        object.__setattr__(self, "states", tuple(dict.fromkeys(self.states)))
        object.__setattr__(self, "kinds", tuple(dict.fromkeys(self.kinds)))


@dataclass(frozen=True)
class Page:
    jobs: list[Job]
    next_cursor: int | None
