"""The `jobs` and `models` tables. Rows are mapped to and from the domain values here and nowhere
else.

The SQLModel classes declare the schema (the migrations must build exactly it); the stores work
with SQLAlchemy Core on `JOBS` and `MODELS` and map rows with the functions below, which is much
cheaper per write than ORM objects and a flush.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Index,
    Integer,
    RowMapping,
    String,
    Table,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator
from sqlmodel import Field, SQLModel

from yolo_orch.domain import (
    Job,
    JobError,
    JobKind,
    JobState,
    Model,
    NewJob,
    NewModel,
    Progress,
)
from yolo_orch.domain.variants import ExportFormat, Lineage, NewVariant, Variant
from yolo_orch.domain.webhooks import WebhookTarget

WIDE_INTEGER = Integer().with_variant(BigInteger(), "postgresql")
"""64 bits on both engines (SQLite's INTEGER is; PostgreSQL's is 32): sequence numbers, which
cursors up to 2**63 - 1 name, and sizes in bytes."""


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC in, aware UTC out, stored as fixed-width ISO-8601 text.

    SQLite has no datetime type and SQLAlchemy's `DateTime` drops the offset there; fixed-width UTC
    text also sorts in time order, which `recent_durations` relies on.
    """

    impl = String
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> str | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"refusing to store a naive datetime: {value!r}")
        return value.astimezone(UTC).isoformat(timespec="microseconds")

    def process_result_value(self, value: str | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return datetime.fromisoformat(value).astimezone(UTC)


class JobRow(SQLModel, table=True):
    __tablename__ = "jobs"
    __table_args__ = (
        # AUTOINCREMENT: a seq is never reused, so a pagination cursor always means one place.
        {"sqlite_autoincrement": True},
    )

    seq: int | None = Field(default=None, primary_key=True, sa_type=WIDE_INTEGER)
    id: str = Field(unique=True, index=True)
    kind: str = Field(index=True)
    state: str
    model: str
    spec: dict[str, Any] = Field(sa_type=JSON)
    priority: int
    gpus: int
    attempt: int
    max_attempts: int
    devices: list[str] = Field(sa_type=JSON)
    progress: dict[str, Any] | None = Field(default=None, sa_type=JSON(none_as_null=True))
    error_code: str | None = None
    error_message: str | None = None
    result: dict[str, Any] | None = Field(default=None, sa_type=JSON(none_as_null=True))
    cancel_requested: bool = False
    idempotency_key: str | None = Field(default=None, unique=True, index=True)
    request_fingerprint: str | None = None
    # SET NULL: deleting a model (refused while queued or running jobs use it) leaves the
    # finished jobs that ran it, still naming it in `model`.
    model_id: str | None = Field(
        default=None, foreign_key="models.id", ondelete="SET NULL", index=True
    )
    created_at: datetime = Field(sa_type=UTCDateTime)
    started_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    finished_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    parent_id: str | None = Field(default=None, index=True)
    chain_id: str | None = Field(default=None, index=True)
    unique_key: str | None = Field(default=None, index=True)
    webhook: dict[str, Any] | None = Field(default=None, sa_type=JSON(none_as_null=True))
    blocked: bool = False


class JobDependencyRow(SQLModel, table=True):
    """A queued job waiting for another to end (`domain.chains.Dependency`). A row lives only
    while both wait: the end of `dep_id` deletes it, and the waiting job is unblocked once it
    has no row left (or cancelled, for an `ok_only` one whose job did not succeed)."""

    __tablename__ = "job_dependencies"

    job_id: str = Field(primary_key=True, foreign_key="jobs.id", ondelete="CASCADE")
    dep_id: str = Field(primary_key=True, index=True)
    ok_only: bool


class JobCountRow(SQLModel, table=True):
    """How many jobs there are per (state, kind), kept by triggers on `jobs` (migration 0004),
    so that a `/metrics` scrape and the queue bound of every submission read a few rows rather
    than count the whole history."""

    __tablename__ = "job_counts"

    state: str = Field(primary_key=True)
    kind: str = Field(primary_key=True)
    count: int


class JobResultRow(SQLModel, table=True):
    """A small job's full result, committed with its outcome (`Outcome.kept_result`): a larger one
    is in the job's result file. A table of its own, so that reading jobs never reads it."""

    __tablename__ = "job_results"

    job_id: str = Field(primary_key=True, foreign_key="jobs.id", ondelete="CASCADE")
    body: bytes


class ModelRow(SQLModel, table=True):
    __tablename__ = "models"

    id: str = Field(primary_key=True)
    name: str = Field(unique=True, index=True)
    sha256: str = Field(unique=True, index=True)
    size_bytes: int = Field(sa_type=WIDE_INTEGER)
    task: str
    class_names: list[str] = Field(sa_type=JSON)
    source: str
    file_name: str
    created_at: datetime = Field(sa_type=UTCDateTime)
    usable: bool = True


class VariantRow(SQLModel, table=True):
    """An exported variant of a model (see `variants.py`). Its files live in
    `{models_dir}/variants/{id}/`."""

    __tablename__ = "model_variants"
    __table_args__ = (UniqueConstraint("model_id", "sha256", name="uq_model_variants_sha256"),)

    id: str = Field(primary_key=True)
    # CASCADE backs up the store's own cascade delete (a model is refused deletion while it has
    # variants unless the client asks for both).
    model_id: str = Field(foreign_key="models.id", ondelete="CASCADE", index=True)
    format: str
    sha256: str
    size_bytes: int = Field(sa_type=WIDE_INTEGER)
    files: dict[str, str] = Field(sa_type=JSON)
    lineage: dict[str, Any] = Field(sa_type=JSON)
    source: str
    job_id: str | None = Field(default=None, index=True)
    created_at: datetime = Field(sa_type=UTCDateTime)
    usable: bool = True
    unusable_reason: str | None = None


JOBS: Table = JobRow.metadata.tables["jobs"]
MODELS: Table = ModelRow.metadata.tables["models"]
JOB_RESULTS: Table = JobResultRow.metadata.tables["job_results"]
JOB_COUNTS: Table = JobCountRow.metadata.tables["job_counts"]
VARIANTS: Table = VariantRow.metadata.tables["model_variants"]
JOB_DEPENDENCIES: Table = JobDependencyRow.metadata.tables["job_dependencies"]

# Serves `next_queued` (WHERE state = 'queued' ORDER BY priority DESC, seq) in index order, with
# no sort, and the bounded count of queued jobs in `create`. Migration 0003 builds it.
Index("ix_jobs_state_priority_desc_seq", JOBS.c.state, JOBS.c.priority.desc(), JOBS.c.seq)
# Serves `list_jobs` with filters: each (state, kind) pair is read newest first from its own range
# of this index and stops after one page, however long the history. Migration 0004 builds it.
Index("ix_jobs_state_kind_seq", JOBS.c.state, JOBS.c.kind, JOBS.c.seq)
# Serves `recent_durations` (newest finished first, for Retry-After) without a scan of the
# history. Migration 0004 builds it.
Index("ix_jobs_finished_at", JOBS.c.finished_at)


NEW_JOB_COLUMNS = (
    "id",
    "kind",
    "state",
    "model",
    "spec",
    "priority",
    "gpus",
    "attempt",
    "max_attempts",
    "devices",
    "cancel_requested",
    "idempotency_key",
    "request_fingerprint",
    "model_id",
    "created_at",
    "parent_id",
    "chain_id",
    "unique_key",
    "webhook",
    "blocked",
)
"""What `new_job_values` gives: the others are NULL, and `seq` is assigned by the database."""


def new_job_values(new: NewJob, now: datetime) -> dict[str, Any]:
    """The columns of a queued job (`NEW_JOB_COLUMNS`)."""
    return {
        "id": new.id,
        "kind": str(new.kind),
        "state": str(JobState.QUEUED),
        "model": new.model,
        "spec": new.spec.stored(),
        "priority": new.priority,
        "gpus": new.gpus,
        "attempt": 0,
        "max_attempts": new.max_attempts,
        "devices": [],
        "cancel_requested": False,
        "idempotency_key": new.idempotency_key,
        "request_fingerprint": new.request_fingerprint,
        "model_id": new.model_id,
        "created_at": now,
        "parent_id": new.parent_id,
        "chain_id": new.chain_id,
        "unique_key": new.unique_key,
        "webhook": None if new.webhook is None else new.webhook.stored(),
        "blocked": bool(new.after),  # the store clears it for dependencies already ended
    }


def error_values(error: JobError | None) -> dict[str, Any]:
    return {
        "error_code": error.code if error is not None else None,
        "error_message": error.message if error is not None else None,
    }


def job_from_row(row: RowMapping) -> Job:
    progress = row["progress"]
    error_code = row["error_code"]
    webhook = row["webhook"]
    return Job(
        id=row["id"],
        seq=row["seq"],
        kind=JobKind(row["kind"]),
        state=JobState(row["state"]),
        model=row["model"],
        spec=row["spec"],
        priority=row["priority"],
        gpus=row["gpus"],
        attempt=row["attempt"],
        max_attempts=row["max_attempts"],
        created_at=row["created_at"],
        devices=tuple(row["devices"]),
        progress=Progress(**progress) if progress is not None else None,
        error=JobError(error_code, row["error_message"] or "") if error_code is not None else None,
        result=row["result"],
        cancel_requested=bool(row["cancel_requested"]),
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        idempotency_key=row["idempotency_key"],
        request_fingerprint=row["request_fingerprint"],
        model_id=row["model_id"],
        parent_id=row["parent_id"],
        chain_id=row["chain_id"],
        unique_key=row["unique_key"],
        webhook=None if webhook is None else WebhookTarget.from_stored(webhook),
        blocked=bool(row["blocked"]),
    )


def new_model_values(new: NewModel, now: datetime) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid4()),
        "name": new.name,
        "sha256": new.sha256,
        "size_bytes": new.size_bytes,
        "task": new.task,
        "class_names": list(new.class_names),
        "source": new.source,
        "file_name": new.file_name,
        "created_at": now,
        "usable": True,
    }


def model_from_row(row: RowMapping) -> Model:
    return Model(
        id=row["id"],
        name=row["name"],
        sha256=row["sha256"],
        size_bytes=row["size_bytes"],
        task=row["task"],
        class_names=tuple(row["class_names"]),
        source=row["source"],
        file_name=row["file_name"],
        created_at=row["created_at"],
        usable=bool(row["usable"]),
    )


def new_variant_values(new: NewVariant, now: datetime) -> dict[str, Any]:
    return {
        "id": new.id,
        "model_id": new.model_id,
        "format": str(new.format),
        "sha256": new.sha256,
        "size_bytes": new.size_bytes,
        "files": dict(new.files),
        "lineage": dataclasses.asdict(new.lineage),
        "source": new.source,
        "job_id": new.job_id,
        "created_at": now,
        "usable": True,
        "unusable_reason": None,
    }


def variant_from_row(row: RowMapping) -> Variant:
    return Variant(
        id=row["id"],
        model_id=row["model_id"],
        format=ExportFormat(row["format"]),
        sha256=row["sha256"],
        size_bytes=row["size_bytes"],
        files=dict(row["files"]),
        lineage=Lineage(**row["lineage"]),
        source=row["source"],
        job_id=row["job_id"],
        created_at=row["created_at"],
        usable=bool(row["usable"]),
        unusable_reason=row["unusable_reason"],
    )
