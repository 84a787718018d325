"""The `jobs` and `models` tables. Rows are mapped to and from the domain values here and nowhere
else."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Index, String
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
        # Serves `next_queued`: WHERE state = 'queued' ORDER BY priority DESC, seq.
        Index("ix_jobs_state_priority_seq", "state", "priority", "seq"),
        # AUTOINCREMENT: a seq is never reused, so a pagination cursor always means one place.
        {"sqlite_autoincrement": True},
    )

    seq: int | None = Field(default=None, primary_key=True)
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

    @classmethod
    def from_new(cls, new: NewJob, now: datetime) -> JobRow:
        """A queued job; `seq` is assigned by the database on insert."""
        return cls(
            id=new.id,
            kind=new.kind,
            state=JobState.QUEUED,
            model=new.model,
            spec=new.spec,
            priority=new.priority,
            gpus=new.gpus,
            attempt=0,
            max_attempts=new.max_attempts,
            devices=[],
            created_at=now,
            idempotency_key=new.idempotency_key,
            request_fingerprint=new.request_fingerprint,
            model_id=new.model_id,
        )

    def set_progress(self, progress: Progress | None) -> None:
        self.progress = progress.as_dict() if progress is not None else None

    def set_error(self, error: JobError | None) -> None:
        self.error_code = error.code if error is not None else None
        self.error_message = error.message if error is not None else None

    def to_job(self) -> Job:
        if self.seq is None:
            raise RuntimeError(f"job {self.id} has no seq: it was never inserted")
        return Job(
            id=self.id,
            seq=self.seq,
            kind=JobKind(self.kind),
            state=JobState(self.state),
            model=self.model,
            spec=self.spec,
            priority=self.priority,
            gpus=self.gpus,
            attempt=self.attempt,
            max_attempts=self.max_attempts,
            created_at=self.created_at,
            devices=tuple(self.devices),
            progress=Progress(**self.progress) if self.progress is not None else None,
            error=(
                JobError(self.error_code, self.error_message or "")
                if self.error_code is not None
                else None
            ),
            result=self.result,
            cancel_requested=self.cancel_requested,
            started_at=self.started_at,
            finished_at=self.finished_at,
            idempotency_key=self.idempotency_key,
            request_fingerprint=self.request_fingerprint,
            model_id=self.model_id,
        )


class ModelRow(SQLModel, table=True):
    __tablename__ = "models"

    id: str = Field(primary_key=True)
    name: str = Field(unique=True, index=True)
    sha256: str = Field(unique=True, index=True)
    size_bytes: int
    task: str
    class_names: list[str] = Field(sa_type=JSON)
    source: str
    file_name: str
    created_at: datetime = Field(sa_type=UTCDateTime)
    usable: bool = True

    @classmethod
    def from_new(cls, new: NewModel, now: datetime) -> ModelRow:
        return cls(
            id=str(uuid.uuid4()),
            name=new.name,
            sha256=new.sha256,
            size_bytes=new.size_bytes,
            task=new.task,
            class_names=list(new.class_names),
            source=new.source,
            file_name=new.file_name,
            created_at=now,
        )

    def to_model(self) -> Model:
        return Model(
            id=self.id,
            name=self.name,
            sha256=self.sha256,
            size_bytes=self.size_bytes,
            task=self.task,
            class_names=tuple(self.class_names),
            source=self.source,
            file_name=self.file_name,
            created_at=self.created_at,
            usable=self.usable,
        )
