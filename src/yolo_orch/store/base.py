"""The store interfaces. The dispatcher and the API depend on these, never on a database."""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime

from yolo_orch.domain import (
    Job,
    JobFilter,
    JobKind,
    JobState,
    Model,
    NewJob,
    NewModel,
    Outcome,
    Page,
    Progress,
    QueueOrder,
)
from yolo_orch.domain.variants import NewVariant, Variant


class JobStore(ABC):
    """Durable job records. Every method that changes a job is one committed write.

    Implementations must be safe to call concurrently from many tasks of one event loop. The
    database a store works on is opened and closed by its owner, not by the store, because the
    job and model stores share it.
    """

    @abstractmethod
    async def create(self, new: NewJob, *, max_queued: int, now: datetime) -> tuple[Job, bool]:
        """Store a queued job and return it with `True`.

        If `new.idempotency_key` names an existing job, return that job with `False` instead
        (raising `IdempotencyKeyReused` when its request fingerprint differs); so too for a
        queued or running job with `new.unique_key` created within `new.unique_for_s`. Jobs in
        `new.after` that have not ended make the job wait (blocked) until they do; raise
        `DependencyNotFound` for an unknown one and `DependencyFailed` for an `ok_only` one
        that ended other than succeeded. Raise
        `ModelNotFound` when `new.model_id` names no usable model, and `QueueFull` when
        `max_queued` jobs are already queued, storing nothing. The model check shares the
        write with the insert, so a model deleted meanwhile cannot leave a job pointing at
        nothing.
        """

    @abstractmethod
    async def create_chain(
        self, chain: list[NewJob], *, max_queued: int, now: datetime
    ) -> list[Job]:
        """Store the jobs of `chain` (a training and its steps, each waiting for those before
        it through `NewJob.after`) in one write, as `create` stores one: all or none. When the
        first one's idempotency key names an existing job, return just that job."""

    @abstractmethod
    async def get(self, job_id: str) -> Job:
        """Raise `JobNotFound` for an unknown id."""

    @abstractmethod
    async def list_jobs(self, where: JobFilter, *, limit: int, before_seq: int | None) -> Page:
        """Newest first. `before_seq` is the cursor returned as `Page.next_cursor`."""

    @abstractmethod
    async def next_queued(self, limit: int, order: QueueOrder | None = None) -> list[Job]:
        """Queued jobs in start order: highest priority first, then submission order; with
        `order`, by its effective priority and only the jobs it admits. Never a job waiting for
        others (`Job.blocked`). Must stay an index read: the dispatcher asks on every admission
        pass, whatever the history."""

    @abstractmethod
    async def count_queued(self, kind: JobKind | None = None) -> int:
        """Queued jobs, of `kind` only if given."""

    @abstractmethod
    async def counts(self) -> dict[tuple[str, str], int]:
        """How many jobs there are per (state, kind), for metrics."""

    @abstractmethod
    async def claim(
        self, job_id: str, devices: tuple[str, ...], now: datetime, model_id: str | None = None
    ) -> Job | None:
        """QUEUED -> RUNNING with `attempt + 1` (and `model_id`, when given: the model its
        reference names at its start); `None` if the job is no longer queued."""

    @abstractmethod
    async def set_progress(self, job_id: str, progress: Progress) -> None:
        """Record progress of a running job; ignored once the job is no longer running."""

    @abstractmethod
    async def switch_model(self, job_id: str, model_id: str) -> None:
        """A running job (a stream whose alias moved) runs `model_id` from now on; ignored once
        the job is no longer running."""

    @abstractmethod
    def released(self) -> list[Job]:
        """The jobs changed, since the last call, because a job they waited for ended (unblocked,
        or cancelled as `dependency_failed`): for those who watch jobs change."""

    @abstractmethod
    async def finish(self, job_id: str, outcome: Outcome, now: datetime) -> Job:
        """A claimed (RUNNING) job -> the outcome's terminal state. Raise `JobAlreadyFinished`
        if the job is terminal already."""

    @abstractmethod
    async def kept_result(self, job_id: str) -> bytes | None:
        """The full result `finish` recorded with the job (`Outcome.kept_result`); None when it
        recorded none (the result is in the job's file, or there is none)."""

    @abstractmethod
    async def cancel(self, job_id: str, now: datetime) -> Job:
        """QUEUED -> CANCELLED at once; RUNNING -> `cancel_requested`; terminal: raise
        `JobAlreadyFinished`."""

    @abstractmethod
    async def recover(
        self,
        now: datetime,
        drained: frozenset[str] = frozenset(),
        spared: frozenset[str] = frozenset(),
    ) -> list[Job]:
        """After a stop: settle every RUNNING job as `domain.after_interruption` says (requeued
        ones lose their devices, progress and start time; those in `drained`, left running by
        a graceful drain, also get their attempt back), but those in `spared`, whose runs went
        on without the server. Returns the jobs it changed."""

    @abstractmethod
    async def requeue(self, job_id: str, now: datetime) -> Job:
        """Settle one RUNNING job whose run was lost (its cluster node went away) as `recover`
        settles a job after a crash, its attempt counted. Raise `JobAlreadyFinished` if the job
        is terminal already."""

    @abstractmethod
    async def recent_durations(self, limit: int, kind: JobKind | None = None) -> list[float]:
        """Run times in seconds of the most recently finished jobs that ran (of `kind` only, if
        given)."""

    @abstractmethod
    async def delete(self, job_id: str) -> Job:
        """Forget a terminal job and return it, so the caller can remove its files. Raise
        `JobActive` while it is queued or running, `JobNotFound` for an unknown id. Models it
        produced stay in the registry: they are the registry's, not the job's."""

    @abstractmethod
    async def expire(
        self, *, finished_before: datetime | None, keep: int | None, limit: int
    ) -> list[Job]:
        """Forget up to `limit` terminal jobs, oldest finished first, that finished before
        `finished_before` or are beyond the `keep` most recently finished; return them. One
        short write, so that expiring a long history in batches never holds up other writes."""

    @abstractmethod
    async def unknown(self, job_ids: list[str]) -> set[str]:
        """Those of `job_ids` that name no job (the sweep's test for an orphaned folder)."""

    async def running(self) -> list[Job]:
        """Every RUNNING job (a few: one per lane slot, or what a crash left)."""
        jobs: list[Job] = []
        cursor = None
        while True:
            where = JobFilter(states=(JobState.RUNNING,))
            page = await self.list_jobs(where, limit=100, before_seq=cursor)
            jobs.extend(page.jobs)
            cursor = page.next_cursor
            if cursor is None:
                return jobs

    async def check_writable(self) -> None:  # noqa: B027 - optional hook
        """Raise if a write would fail now (used by readiness)."""


class ModelStore(ABC):
    """The weights registry's records; the files themselves are `weights.py`'s business.

    Shares its database with the `JobStore`, so that a delete and a job submission cannot
    interleave: each sees the other's committed write or none of it.
    """

    @abstractmethod
    async def add(self, new: NewModel, now: datetime) -> tuple[Model, bool]:
        """Register `new` and return it with `True`.

        The same weights imported twice are one model: if `new.sha256` is registered already,
        return that model with `False`, whatever its name. Raise `ModelNameTaken` if another
        sha256 has `new.name`.
        """

    @abstractmethod
    async def get(self, ref: str) -> Model:
        """`ref` is an id or a name (clients know either). Raise `ModelNotFound` if unknown."""

    @abstractmethod
    async def list_models(self) -> list[Model]:
        """Newest first."""

    @abstractmethod
    async def delete(self, ref: str, *, cascade: bool = False) -> Model:
        """Forget the model and return it, so the caller can remove its file.

        Raise `ModelInUse` while queued or running jobs use it (they would fail for want of
        it); finished jobs do not block, and lose their `model_id`. Raise `ModelHasVariants`
        while it has variants, unless `cascade`, which forgets them with it. Raise
        `ModelNotFound` if unknown.
        """

    @abstractmethod
    async def mark_unusable(self, model_id: str) -> None:
        """Refuse new jobs for a model whose file no longer matches its fingerprint; it stays
        listed so that clients see why. Raise `ModelNotFound` for an unknown id."""

    @abstractmethod
    async def add_variant(self, new: NewVariant, now: datetime) -> tuple[Variant, bool]:
        """Register `new` and return it with `True`.

        Return the variant already registered instead, with `False`, when the model has one with
        the same digest, or when `new.job_id` registered one of the same format (a job rerun
        after a crash). Raise `ModelNotFound` if `new.model_id` is unknown.
        """

    @abstractmethod
    async def list_variants(self, model_id: str) -> list[Variant]:
        """The model's variants, newest first (none for an unknown model)."""

    @abstractmethod
    async def get_variant(self, variant_id: str) -> Variant:
        """Raise `VariantNotFound` if unknown."""

    @abstractmethod
    async def delete_variant(self, variant_id: str) -> Variant:
        """Forget the variant and return it. Raise `VariantNotFound` if unknown."""

    @abstractmethod
    async def mark_variant_unusable(self, variant_id: str, reason: str) -> None:
        """Never pick the variant again (its files no longer match, or it kept failing jobs);
        it stays listed, with `reason`, so that clients see why. Raise `VariantNotFound` if
        unknown."""
