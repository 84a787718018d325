"""The durable stores: SQLite in WAL mode through SQLAlchemy's async engine (aiosqlite).

One `SQLiteDatabase` serves both the job store (here) and the model store (`sqlite_models.py`).
SQLite allows one writer at a time. Writes therefore queue on one `asyncio.Lock` in this
process and each write transaction starts with `BEGIN IMMEDIATE`, so it takes the write lock
before it reads anything: a read-then-write can never be refused half way with "database is
locked", and `busy_timeout` covers a writer in another process (a migration, a second tool).
Reads use a plain deferred `BEGIN` and, thanks to WAL, never wait for the writer.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, ParamSpec, TypeVar

from sqlalchemy import event, func, update
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from yolo_orch.domain import (
    Job,
    JobFilter,
    JobState,
    NewJob,
    Outcome,
    Page,
    Progress,
    after_interruption,
)
from yolo_orch.errors import (
    IdempotencyKeyReused,
    JobAlreadyFinished,
    JobNotFound,
    ModelNotFound,
    QueueFull,
)
from yolo_orch.store.base import JobStore
from yolo_orch.store.tables import JobRow, ModelRow

_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=FULL",
    "PRAGMA busy_timeout=5000",
    "PRAGMA foreign_keys=ON",
)

_BEGIN_MODE = "yolo_orch_begin_mode"
"""Execution option read by `_begin`: "IMMEDIATE" for writes, else a deferred BEGIN."""


def sync_url(url: str) -> str:
    """`sqlite+aiosqlite:///x` -> `sqlite:///x`: the same database for sync tools (Alembic)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        raise ValueError(f"not a SQLite database URL: {parsed!r}")
    return parsed.set(drivername="sqlite").render_as_string(hide_password=False)


def _on_connect(dbapi_connection: Any, _record: Any) -> None:
    # isolation_level=None stops the sqlite3 driver from issuing its own BEGIN, so that
    # `_begin` alone decides how each transaction starts (SQLAlchemy's documented recipe).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    for pragma in _PRAGMAS:
        cursor.execute(pragma)
    cursor.close()


_P = ParamSpec("_P")
_T = TypeVar("_T")


def shielded(
    method: Callable[_P, Coroutine[Any, Any, _T]],
) -> Callable[_P, Coroutine[Any, Any, _T]]:
    """Run the operation to its end even if the caller is cancelled.

    A transaction cut off half way would leave its pooled connection holding SQLite's write
    lock, and every later write would fail with "database is locked".
    """

    @functools.wraps(method)
    async def run(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        return await asyncio.shield(asyncio.ensure_future(method(*args, **kwargs)))

    return run


def _begin(conn: Connection) -> None:
    mode = conn.get_execution_options().get(_BEGIN_MODE, "DEFERRED")
    conn.exec_driver_sql(f"BEGIN {mode}")


class SQLiteDatabase:
    """The engines, the in-process write lock and the transaction discipline, shared by the
    stores so that all their writes queue on one lock."""

    def __init__(self, database_url: str) -> None:
        self._url = database_url
        self._engine: AsyncEngine | None = None
        self._writer: AsyncEngine | None = None
        self._write_lock = asyncio.Lock()

    async def open(self) -> None:
        engine = create_async_engine(self._url)
        event.listen(engine.sync_engine, "connect", _on_connect)
        event.listen(engine.sync_engine, "begin", _begin)
        self._engine = engine
        self._writer = engine.execution_options(**{_BEGIN_MODE: "IMMEDIATE"})

    async def close(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()
        self._engine = self._writer = None

    @shielded
    async def check_writable(self) -> None:
        """Take SQLite's write lock and let it go: fails on a read-only or locked database."""
        async with self._write_lock, self._writer_engine().connect() as conn:
            await conn.begin()
            await conn.rollback()

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[AsyncSession]:
        async with AsyncSession(self._reader_engine(), expire_on_commit=False) as session:
            yield session

    @asynccontextmanager
    async def writing(self) -> AsyncIterator[AsyncSession]:
        """One write transaction: committed on success, rolled back on any exception."""
        async with (
            self._write_lock,
            AsyncSession(self._writer_engine(), expire_on_commit=False) as session,
            session.begin(),
        ):
            yield session

    def _reader_engine(self) -> AsyncEngine:
        if self._engine is None:
            raise RuntimeError("SQLiteDatabase is not open; call open() first")
        return self._engine

    def _writer_engine(self) -> AsyncEngine:
        if self._writer is None:
            raise RuntimeError("SQLiteDatabase is not open; call open() first")
        return self._writer


class SQLiteJobStore(JobStore):
    def __init__(self, db: SQLiteDatabase) -> None:
        self._db = db

    @shielded
    async def create(self, new: NewJob, *, max_queued: int, now: datetime) -> tuple[Job, bool]:
        # Key lookup, model check, queue bound and insert share one write transaction:
        # concurrent creates with one key make exactly one job, the bound cannot be overshot,
        # and a model deleted at the same time is either still there or refuses the job.
        async with self._db.writing() as session:
            if new.idempotency_key is not None:
                existing = (
                    await session.exec(
                        select(JobRow).where(col(JobRow.idempotency_key) == new.idempotency_key)
                    )
                ).first()
                if existing is not None:
                    if existing.request_fingerprint != new.request_fingerprint:
                        raise IdempotencyKeyReused(new.idempotency_key, existing.id)
                    return existing.to_job(), False
            if new.model_id is not None and not await _usable_model(session, new.model_id):
                raise ModelNotFound(new.model_id)
            if await _count_queued(session) >= max_queued:
                raise QueueFull(max_queued)
            row = JobRow.from_new(new, now)
            session.add(row)
            await session.flush()
            return row.to_job(), True

    @shielded
    async def get(self, job_id: str) -> Job:
        async with self._db.reading() as session:
            return (await _row(session, job_id)).to_job()

    @shielded
    async def list_jobs(self, where: JobFilter, *, limit: int, before_seq: int | None) -> Page:
        stmt = select(JobRow)
        if where.states:
            stmt = stmt.where(col(JobRow.state).in_(where.states))
        if where.kinds:
            stmt = stmt.where(col(JobRow.kind).in_(where.kinds))
        if before_seq is not None:
            stmt = stmt.where(col(JobRow.seq) < before_seq)
        # One row more than asked says whether another page exists.
        stmt = stmt.order_by(col(JobRow.seq).desc()).limit(limit + 1)
        async with self._db.reading() as session:
            rows = (await session.exec(stmt)).all()
        page = [row.to_job() for row in rows[:limit]]
        more = len(rows) > limit
        return Page(jobs=page, next_cursor=page[-1].seq if more and page else None)

    @shielded
    async def next_queued(self, limit: int) -> list[Job]:
        stmt = (
            select(JobRow)
            .where(col(JobRow.state) == JobState.QUEUED)
            .order_by(col(JobRow.priority).desc(), col(JobRow.seq))
            .limit(limit)
        )
        async with self._db.reading() as session:
            return [row.to_job() for row in (await session.exec(stmt)).all()]

    @shielded
    async def count_queued(self) -> int:
        async with self._db.reading() as session:
            return await _count_queued(session)

    @shielded
    async def counts(self) -> dict[tuple[str, str], int]:
        stmt = select(JobRow.state, JobRow.kind, func.count()).group_by(
            col(JobRow.state), col(JobRow.kind)
        )
        async with self._db.reading() as session:
            rows = (await session.exec(stmt)).all()
        return {(str(state), str(kind)): count for state, kind, count in rows}

    @shielded
    async def claim(self, job_id: str, devices: tuple[str, ...], now: datetime) -> Job | None:
        stmt = (
            update(JobRow)
            .where(col(JobRow.id) == job_id, col(JobRow.state) == JobState.QUEUED)
            .values(
                state=JobState.RUNNING,
                devices=list(devices),
                attempt=col(JobRow.attempt) + 1,
                started_at=now,
                progress=None,
            )
            .returning(JobRow)
        )
        async with self._db.writing() as session:
            row: JobRow | None = (await session.exec(stmt)).scalars().first()
            if row is None:
                await _row(session, job_id)  # raises JobNotFound for an unknown id
                return None
            return row.to_job()

    @shielded
    async def set_progress(self, job_id: str, progress: Progress) -> None:
        stmt = (
            update(JobRow)
            .where(col(JobRow.id) == job_id, col(JobRow.state) == JobState.RUNNING)
            .values(progress=progress.as_dict())
            .returning(col(JobRow.seq))
        )
        async with self._db.writing() as session:
            if (await session.exec(stmt)).first() is None:
                await _row(session, job_id)  # raises JobNotFound for an unknown id

    @shielded
    async def finish(self, job_id: str, outcome: Outcome, now: datetime) -> Job:
        # Read-check-write is safe: the IMMEDIATE transaction already holds the write lock.
        async with self._db.writing() as session:
            row = await _row(session, job_id)
            state = JobState(row.state)
            if state.is_terminal:
                raise JobAlreadyFinished(job_id, state)
            row.state = outcome.state
            row.set_error(outcome.error)
            row.result = outcome.result
            if outcome.progress is not None:
                row.set_progress(outcome.progress)
            row.finished_at = now
            await session.flush()
            return row.to_job()

    @shielded
    async def cancel(self, job_id: str, now: datetime) -> Job:
        async with self._db.writing() as session:
            row = await _row(session, job_id)
            state = JobState(row.state)
            if state.is_terminal:
                raise JobAlreadyFinished(job_id, state)
            row.cancel_requested = True
            if state is JobState.QUEUED:
                row.state = JobState.CANCELLED
                row.finished_at = now
            await session.flush()
            return row.to_job()

    @shielded
    async def recover(self, now: datetime) -> list[Job]:
        stmt = select(JobRow).where(col(JobRow.state) == JobState.RUNNING).order_by(col(JobRow.seq))
        async with self._db.writing() as session:
            rows = (await session.exec(stmt)).all()
            for row in rows:
                state, error = after_interruption(row.to_job())
                row.state = state
                if state is JobState.QUEUED:
                    row.devices = []
                    row.progress = None
                    row.started_at = None
                else:
                    row.set_error(error)
                    row.finished_at = now
            await session.flush()
            return [row.to_job() for row in rows]

    @shielded
    async def recent_durations(self, limit: int) -> list[float]:
        stmt = (
            select(JobRow.started_at, JobRow.finished_at)
            .where(col(JobRow.started_at).is_not(None), col(JobRow.finished_at).is_not(None))
            .order_by(col(JobRow.finished_at).desc(), col(JobRow.seq))
            .limit(limit)
        )
        async with self._db.reading() as session:
            rows = (await session.exec(stmt)).all()
        return [
            (finished - started).total_seconds()
            for started, finished in rows
            if started is not None and finished is not None
        ]

    async def check_writable(self) -> None:
        await self._db.check_writable()


async def _row(session: AsyncSession, job_id: str) -> JobRow:
    row = (await session.exec(select(JobRow).where(col(JobRow.id) == job_id))).first()
    if row is None:
        raise JobNotFound(job_id)
    return row


async def _count_queued(session: AsyncSession) -> int:
    stmt = select(func.count()).select_from(JobRow).where(col(JobRow.state) == JobState.QUEUED)
    return (await session.exec(stmt)).one()


async def _usable_model(session: AsyncSession, model_id: str) -> bool:
    stmt = select(ModelRow.id).where(col(ModelRow.id) == model_id, col(ModelRow.usable))
    return (await session.exec(stmt)).first() is not None
