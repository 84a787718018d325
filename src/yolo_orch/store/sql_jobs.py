"""The durable job store, on a `Database` (`database.py`: one writer, group commit, every
acknowledged write durable; SQLite or PostgreSQL, the same ops). Its ops use few statements
(each costs SQLAlchemy's Python work on a thread that shares the GIL with the event loop):
`create` is one `INSERT ... SELECT ... WHERE <room in the queue> AND <model usable> ON
CONFLICT (idempotency_key) DO NOTHING RETURNING *`, and reads why only on the rare refusal;
the dispatcher's writes (`sql_runs.py`) are single `UPDATE ... RETURNING`s built once."""

from __future__ import annotations

import functools
import logging
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Insert,
    Select,
    bindparam,
    delete,
    func,
    or_,
    select,
)
from sqlalchemy.engine import Connection

from yolo_orch.domain import (
    Job,
    JobFilter,
    JobKind,
    JobState,
    NewJob,
    Outcome,
    Page,
    Progress,
    QueueOrder,
)
from yolo_orch.domain.webhooks import WebhookEvent
from yolo_orch.errors import (
    IdempotencyKeyReused,
    JobActive,
    JobAlreadyFinished,
    ModelNotFound,
    QueueFull,
)
from yolo_orch.store import sql_runs
from yolo_orch.store.base import JobStore
from yolo_orch.store.database import Database
from yolo_orch.store.dialects import InsertFor, PerDialect
from yolo_orch.store.job_rows import (
    ACTIVE,
    QUEUED,
    TERMINAL_STATES,
    get_job,
    state_of,
    update_job,
)
from yolo_orch.store.outbox import NO_OUTBOX, Outbox
from yolo_orch.store.sql_deps import (
    pending_dependencies,
    release_dependents,
    write_dependencies,
)
from yolo_orch.store.sql_reads import aged_queue_head, list_query
from yolo_orch.store.tables import (
    JOB_COUNTS,
    JOB_DEPENDENCIES,
    JOB_RESULTS,
    JOBS,
    MODELS,
    NEW_JOB_COLUMNS,
    job_from_row,
    new_job_values,
)

log = logging.getLogger(__name__)


class SqlJobStore(JobStore):
    def __init__(self, db: Database, outbox: Outbox = NO_OUTBOX) -> None:
        self._db = db
        self._outbox = outbox
        self._released: list[Job] = []
        """Jobs the writer's ops changed because a job they waited for ended (appended on the
        writer's thread, taken on the loop's: a list's append and swap are atomic)."""

    async def create(self, new: NewJob, *, max_queued: int, now: datetime) -> tuple[Job, bool]:
        # Key lookup, model check, queue bound and insert share one write transaction:
        # concurrent creates with one key make exactly one job, the bound cannot be overshot,
        # and a model deleted at the same time is either still there or refuses the job.
        created = await self._db.write(
            functools.partial(_create, new, max_queued, now, self._outbox), fails_clean=True
        )
        self._notify(created[1])
        return created

    async def create_chain(
        self, chain: list[NewJob], *, max_queued: int, now: datetime
    ) -> list[Job]:
        # Not `fails_clean`: a refusal of a later job must undo the earlier ones (the SAVEPOINT).
        jobs = await self._db.write(functools.partial(self._create_all, chain, max_queued, now))
        self._notify(True)
        return jobs

    def _create_all(
        self, chain: list[NewJob], max_queued: int, now: datetime, conn: Connection
    ) -> list[Job]:
        jobs = []
        for new in chain:
            job, created = _create(new, max_queued, now, self._outbox, conn)
            if not created:  # a key of the chain's first job, seen before: that chain stands
                return [job]
            jobs.append(job)
        return jobs

    def _notify(self, recorded: bool) -> None:
        if recorded and self._outbox.active:
            self._outbox.committed()

    def released(self) -> list[Job]:
        taken, self._released = self._released, []
        return taken

    async def get(self, job_id: str) -> Job:
        return await self._db.read(functools.partial(get_job, job_id))

    async def list_jobs(self, where: JobFilter, *, limit: int, before_seq: int | None) -> Page:
        # One row more than asked says whether another page exists.
        stmt, params = list_query(where, limit + 1, before_seq)
        jobs = await self._db.read(functools.partial(_jobs, stmt, params=params))
        page = jobs[:limit]
        more = len(jobs) > limit
        return Page(jobs=page, next_cursor=page[-1].seq if more and page else None)

    async def next_queued(self, limit: int, order: QueueOrder | None = None) -> list[Job]:
        if order is None or order.aging_per_minute == 0:
            # Served in order by the index (state, priority DESC, seq): no sort.
            stmt = (
                select(JOBS)
                .where(QUEUED, JOBS.c.blocked.is_(False))
                .order_by(JOBS.c.priority.desc(), JOBS.c.seq)
            )
            if order is not None and order.max_gpus is not None:
                stmt = stmt.where(JOBS.c.gpus <= order.max_gpus)
            return await self._db.read(functools.partial(_jobs, stmt.limit(limit)))
        return await self._db.read(functools.partial(aged_queue_head, limit, order))

    async def count_queued(self, kind: JobKind | None = None) -> int:
        stmt = _COUNT_QUEUED
        if kind is not None:
            stmt = stmt.where(JOB_COUNTS.c.kind == str(kind))
        count: int = await self._db.read(lambda conn: conn.execute(stmt).scalar_one())
        return count

    async def counts(self) -> dict[tuple[str, str], int]:
        stmt = select(JOB_COUNTS).where(JOB_COUNTS.c.count > 0)
        rows = await self._db.read(lambda conn: conn.execute(stmt).all())
        return {(str(state), str(kind)): count for state, kind, count in rows}

    async def claim(
        self, job_id: str, devices: tuple[str, ...], now: datetime, model_id: str | None = None
    ) -> Job | None:
        job = await self._db.write(
            functools.partial(sql_runs.claim, job_id, devices, now, model_id, self._outbox),
            fails_clean=True,
            answer_before_fsync=True,  # no client is told; the run starts without waiting
        )
        self._notify(job is not None)
        return job

    async def set_progress(self, job_id: str, progress: Progress) -> None:
        recorded = await self._db.write(
            functools.partial(sql_runs.set_progress, job_id, progress, self._outbox),
            fails_clean=True,
            answer_before_fsync=True,
        )
        self._notify(recorded)

    async def switch_model(self, job_id: str, model_id: str) -> None:
        await self._db.write(
            functools.partial(sql_runs.switch_model, job_id, model_id), fails_clean=True
        )

    async def finish(self, job_id: str, outcome: Outcome, now: datetime) -> Job:
        job = await self._db.write(
            functools.partial(sql_runs.finish, job_id, outcome, now, self._outbox, self._released),
            fails_clean=True,
        )
        self._notify(True)
        return job

    async def kept_result(self, job_id: str) -> bytes | None:
        stmt = select(JOB_RESULTS.c.body).where(JOB_RESULTS.c.job_id == job_id)
        body: bytes | None = await self._db.read(lambda conn: conn.execute(stmt).scalar())
        return body

    async def cancel(self, job_id: str, now: datetime) -> Job:
        job = await self._db.write(
            functools.partial(_cancel, job_id, now, self._outbox, self._released),
            fails_clean=True,
        )
        self._notify(True)
        return job

    async def recover(
        self,
        now: datetime,
        drained: frozenset[str] = frozenset(),
        spared: frozenset[str] = frozenset(),
    ) -> list[Job]:
        jobs = await self._db.write(
            functools.partial(sql_runs.recover, now, drained, spared, self._outbox, self._released)
        )
        self._notify(bool(jobs))
        return jobs

    async def requeue(self, job_id: str, now: datetime) -> Job:
        job = await self._db.write(
            functools.partial(sql_runs.requeue, job_id, now, self._outbox, self._released)
        )
        self._notify(True)
        return job

    async def recent_durations(self, limit: int, kind: JobKind | None = None) -> list[float]:
        stmt = select(JOBS.c.started_at, JOBS.c.finished_at).where(
            JOBS.c.started_at.is_not(None), JOBS.c.finished_at.is_not(None)
        )
        if kind is not None:
            stmt = stmt.where(JOBS.c.kind == str(kind))
        stmt = stmt.order_by(JOBS.c.finished_at.desc(), JOBS.c.seq).limit(limit)
        rows = await self._db.read(lambda conn: conn.execute(stmt).all())
        return [(finished - started).total_seconds() for started, finished in rows]

    async def delete(self, job_id: str) -> Job:
        return await self._db.write(functools.partial(_delete, job_id))

    async def expire(
        self, *, finished_before: datetime | None, keep: int | None, limit: int
    ) -> list[Job]:
        return await self._db.write(functools.partial(_expire, finished_before, keep, limit))

    async def unknown(self, job_ids: list[str]) -> set[str]:
        stmt = select(JOBS.c.id).where(JOBS.c.id.in_(job_ids))
        known = await self._db.read(lambda conn: set(conn.execute(stmt).scalars()))
        return set(job_ids) - known

    async def check_writable(self) -> None:
        await self._db.check_writable()


# The ops: each runs on a read connection or on the write connection, inside a transaction.


def _jobs(stmt: Select[Any], conn: Connection, params: dict[str, Any] | None = None) -> list[Job]:
    return [job_from_row(row) for row in conn.execute(stmt, params).mappings()]


_COUNT_QUEUED = select(func.coalesce(func.sum(JOB_COUNTS.c.count), 0)).where(
    JOB_COUNTS.c.state == str(JobState.QUEUED)
)
"""From the counts the triggers keep: one row per kind, however long the queue."""


def _insert_queued(insert: InsertFor) -> Insert:
    """INSERT a queued job if the queue has room and its model (if any) is usable; with an
    idempotency key already taken, insert nothing. Returns the new row, or no row.

    The queue's length is read from the counts the triggers keep, not counted.
    """
    room = _COUNT_QUEUED.scalar_subquery() < bindparam("max_queued")
    model_id = bindparam("model_id", type_=JOBS.c.model_id.type)
    usable = select(MODELS.c.id).where(MODELS.c.id == model_id, MODELS.c.usable).exists()
    model_ok: ColumnElement[bool] = or_(model_id.is_(None), usable)
    values = select(
        *(
            model_id if name == "model_id" else bindparam(name, type_=JOBS.c[name].type)
            for name in NEW_JOB_COLUMNS
        )
    ).where(room, model_ok)
    return (
        insert(JOBS)
        .from_select(NEW_JOB_COLUMNS, values)
        .on_conflict_do_nothing(index_elements=[JOBS.c.idempotency_key])
        .returning(*JOBS.c)
    )


_INSERT_QUEUED = PerDialect(_insert_queued)


def _create(
    new: NewJob, max_queued: int, now: datetime, outbox: Outbox, conn: Connection
) -> tuple[Job, bool]:
    # A retry is answered by its key before anything that may have changed since the first try
    # (the unique job ended, a dependency failed), as the memory store answers it. Only here:
    # for other jobs the insert's conflict clause finds the key in the same statement.
    retry_first = new.idempotency_key is not None and (new.unique_key is not None or new.after)
    if retry_first and (existing := _by_idempotency_key(new, conn)) is not None:
        return existing, False
    if new.unique_key is not None and (same := _unique_match(new, now, conn)) is not None:
        return same, False
    pending = pending_dependencies(new, conn)
    params = {**new_job_values(new, now), "blocked": bool(pending), "max_queued": max_queued}
    row = conn.execute(_INSERT_QUEUED(conn), params).mappings().first()
    if row is not None:
        job = job_from_row(row)
        write_dependencies(job.id, pending, conn)
        outbox.record(conn, job, WebhookEvent.QUEUED, now)
        return job, True
    # Refused: say why, in the contract's order (the key first, then the model, then the bound).
    if (existing := _by_idempotency_key(new, conn)) is not None:
        return existing, False
    if new.model_id is not None:
        usable = select(MODELS.c.id).where(MODELS.c.id == new.model_id, MODELS.c.usable)
        if conn.execute(usable).first() is None:
            raise ModelNotFound(new.model_id)
    raise QueueFull(max_queued)


def _by_idempotency_key(new: NewJob, conn: Connection) -> Job | None:
    """The job `new`'s idempotency key made, if any; `IdempotencyKeyReused` when that job was
    asked for with another request."""
    if new.idempotency_key is None:
        return None
    by_key = select(JOBS).where(JOBS.c.idempotency_key == new.idempotency_key)
    existing = conn.execute(by_key).mappings().first()
    if existing is None:
        return None
    if existing["request_fingerprint"] != new.request_fingerprint:
        raise IdempotencyKeyReused(new.idempotency_key, existing["id"])
    return job_from_row(existing)


def _unique_match(new: NewJob, now: datetime, conn: Connection) -> Job | None:
    """The queued or running job with `new`'s unique key created within its window, if any."""
    since = now - timedelta(seconds=new.unique_for_s)
    stmt = (
        select(JOBS)
        .where(JOBS.c.unique_key == new.unique_key, ACTIVE, JOBS.c.created_at >= since)
        .order_by(JOBS.c.seq)
        .limit(1)
    )
    row = conn.execute(stmt).mappings().first()
    return None if row is None else job_from_row(row)


def _cancel(
    job_id: str, now: datetime, outbox: Outbox, released: list[Job], conn: Connection
) -> Job:
    state = state_of(conn, job_id)
    if state.is_terminal:
        raise JobAlreadyFinished(job_id, state)
    values: dict[str, Any] = {"cancel_requested": True}
    if state is JobState.QUEUED:
        values.update(state=str(JobState.CANCELLED), finished_at=now, blocked=False)
        conn.execute(delete(JOB_DEPENDENCIES).where(JOB_DEPENDENCIES.c.job_id == job_id))
    job = update_job(conn, job_id, **values)
    assert job is not None  # the write lock is held: it cannot have gone
    if job.state.is_terminal:
        outbox.record(conn, job, WebhookEvent.CANCELLED, now)
        release_dependents(job, now, outbox, conn, released)
    return job


def _delete(job_id: str, conn: Connection) -> Job:
    state = state_of(conn, job_id)
    if not state.is_terminal:
        raise JobActive(job_id, state)
    row = conn.execute(delete(JOBS).where(JOBS.c.id == job_id).returning(*JOBS.c)).mappings().one()
    return job_from_row(row)


_COUNT_TERMINAL = select(func.coalesce(func.sum(JOB_COUNTS.c.count), 0)).where(
    JOB_COUNTS.c.state.in_(TERMINAL_STATES)
)


def _expire(
    finished_before: datetime | None, keep: int | None, limit: int, conn: Connection
) -> list[Job]:
    """The oldest finished jobs come first in the index on `finished_at`, and both rules expire
    a prefix of that order: read `limit` rows from its start and delete the prefix that is due.
    The number of finished jobs comes from the counts the triggers keep, not a count."""
    excess = 0 if keep is None else max(0, conn.execute(_COUNT_TERMINAL).scalar_one() - keep)
    oldest = conn.execute(
        select(JOBS.c.seq, JOBS.c.finished_at)
        .where(JOBS.c.finished_at.is_not(None), JOBS.c.state.in_(TERMINAL_STATES))
        .order_by(JOBS.c.finished_at, JOBS.c.seq)
        .limit(limit)
    ).all()
    due = [
        seq
        for index, (seq, finished_at) in enumerate(oldest)
        if index < excess or (finished_before is not None and finished_at < finished_before)
    ]
    if not due:
        return []
    rows = conn.execute(delete(JOBS).where(JOBS.c.seq.in_(due)).returning(*JOBS.c)).mappings()
    by_seq = {job.seq: job for job in map(job_from_row, rows)}
    return [by_seq[seq] for seq in due]
