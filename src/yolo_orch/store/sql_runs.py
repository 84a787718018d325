"""The dispatcher's writes to the jobs it runs: the claim, progress and the outcome, each a single
`UPDATE ... RETURNING` built once (the outcome with a small result's `INSERT` in the same
transaction), and what recovery or a requeue make of a run that ended without one."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import BindParameter, String, bindparam, func, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.sql.dml import Update

from yolo_orch.domain import Job, JobState, Outcome, Progress, after_interruption
from yolo_orch.domain.webhooks import WebhookEvent
from yolo_orch.errors import JobAlreadyFinished
from yolo_orch.store.dialects import ConflictInsert, InsertFor, PerDialect
from yolo_orch.store.job_rows import (
    ACTIVE,
    QUEUED,
    RUNNING,
    get_job,
    state_of,
    update_job,
)
from yolo_orch.store.outbox import Outbox
from yolo_orch.store.sql_deps import release_dependents
from yolo_orch.store.tables import JOB_RESULTS, JOBS, error_values, job_from_row


def _dispatcher_update(*where: Any, **values: Any) -> Update:
    """An `UPDATE` of one job (bound as `job_id`), to be built once: building and
    caching a statement per call cost SQLAlchemy about twice what executing it does, on the
    writer's thread, for writes made once or twice per job run."""
    return update(JOBS).where(JOBS.c.id == bindparam("job_id"), *where).values(**values)


_CLAIM = _dispatcher_update(
    QUEUED,
    state=str(JobState.RUNNING),
    devices=bindparam("claimed_devices"),
    attempt=JOBS.c.attempt + 1,
    started_at=bindparam("claimed_at"),
    progress=None,
    # A model named by alias or by the job producing it is the one it names at the start.
    model_id=func.coalesce(bindparam("claimed_model_id", type_=String), JOBS.c.model_id),
).returning(*JOBS.c)
_SET_PROGRESS = _dispatcher_update(RUNNING, progress=bindparam("new_progress")).returning(
    JOBS.c.seq
)
_SET_PROGRESS_READ_BACK = _dispatcher_update(RUNNING, progress=bindparam("new_progress")).returning(
    *JOBS.c
)
_SWITCH_MODEL = _dispatcher_update(RUNNING, model_id=bindparam("new_model_id")).returning(
    JOBS.c.seq
)
_FINISH_VALUES: dict[str, BindParameter[Any]] = {
    column: bindparam(f"outcome_{column}")
    for column in ("state", *error_values(None), "result", "finished_at")
}
_FINISH = _dispatcher_update(ACTIVE, **_FINISH_VALUES).returning(*JOBS.c)
_FINISH_WITH_PROGRESS = _dispatcher_update(
    ACTIVE, **_FINISH_VALUES, progress=bindparam("outcome_progress")
).returning(*JOBS.c)


def claim(
    job_id: str,
    devices: tuple[str, ...],
    now: datetime,
    model_id: str | None,
    outbox: Outbox,
    conn: Connection,
) -> Job | None:
    params = {
        "job_id": job_id,
        "claimed_devices": list(devices),
        "claimed_at": now,
        "claimed_model_id": model_id,
    }
    row = conn.execute(_CLAIM, params).mappings().first()
    if row is None:
        state_of(conn, job_id)  # raises JobNotFound for an unknown id
        return None
    job = job_from_row(row)
    outbox.record(conn, job, WebhookEvent.STARTED, now)
    return job


def set_progress(job_id: str, progress: Progress, outbox: Outbox, conn: Connection) -> bool:
    """Record `progress`; whether the outbox kept an event of it. The job is read back for
    the outbox only where it may keep one."""
    params = {"job_id": job_id, "new_progress": progress.as_dict()}
    stmt = _SET_PROGRESS_READ_BACK if outbox.active else _SET_PROGRESS
    row = conn.execute(stmt, params).mappings().first()
    if row is None:
        state_of(conn, job_id)  # raises JobNotFound for an unknown id
        return False
    if not outbox.active:
        return False
    return outbox.record(conn, job_from_row(row), WebhookEvent.PROGRESS, datetime.now(UTC))


def switch_model(job_id: str, model_id: str, conn: Connection) -> None:
    params = {"job_id": job_id, "new_model_id": model_id}
    if conn.execute(_SWITCH_MODEL, params).first() is None:
        state_of(conn, job_id)  # raises JobNotFound for an unknown id


def finish(
    job_id: str,
    outcome: Outcome,
    now: datetime,
    outbox: Outbox,
    released: list[Job],
    conn: Connection,
) -> Job:
    values = {
        "state": str(outcome.state),
        **error_values(outcome.error),
        "result": outcome.result,
        "finished_at": now,
    }
    params: dict[str, Any] = {f"outcome_{column}": value for column, value in values.items()}
    params["job_id"] = job_id
    stmt = _FINISH
    if outcome.progress is not None:
        stmt = _FINISH_WITH_PROGRESS
        params["outcome_progress"] = outcome.progress.as_dict()
    row = conn.execute(stmt, params).mappings().first()
    if row is None:
        raise JobAlreadyFinished(job_id, state_of(conn, job_id))
    if outcome.kept_result is not None:
        conn.execute(_INSERT_RESULT(conn), {"job_id": job_id, "body": outcome.kept_result})
    job = job_from_row(row)
    ended(job, now, outbox, released, conn)
    return job


def ended(job: Job, now: datetime, outbox: Outbox, released: list[Job], conn: Connection) -> None:
    """What follows a job's end in its own transaction: its event, and the jobs waiting for it."""
    outbox.record(conn, job, WebhookEvent(str(job.state)), now)
    release_dependents(job, now, outbox, conn, released)


def _insert_result(insert: InsertFor) -> ConflictInsert:
    new = insert(JOB_RESULTS)
    return new.on_conflict_do_update(
        index_elements=[JOB_RESULTS.c.job_id], set_={"body": new.excluded.body}
    )


_INSERT_RESULT = PerDialect(_insert_result)


def recover(
    now: datetime,
    drained: frozenset[str],
    spared: frozenset[str],
    outbox: Outbox,
    released: list[Job],
    conn: Connection,
) -> list[Job]:
    # Sorted here, not by SQL: with `ORDER BY seq`, SQLite may walk every job in seq order
    # rather than seek the few running ones (it does once `ANALYZE` has seen a long history).
    running = [job_from_row(row) for row in conn.execute(select(JOBS).where(RUNNING)).mappings()]
    changed = []
    for job in sorted(running, key=lambda job: job.seq):
        if job.id in spared:
            continue
        updated = update_job(conn, job.id, **_interrupted(job, now, drained=job.id in drained))
        assert updated is not None
        _settled(updated, now, outbox, released, conn)
        changed.append(updated)
    return changed


def requeue(
    job_id: str, now: datetime, outbox: Outbox, released: list[Job], conn: Connection
) -> Job:
    job = get_job(job_id, conn)
    if job.state.is_terminal:
        raise JobAlreadyFinished(job_id, job.state)
    updated = update_job(conn, job_id, RUNNING, **_interrupted(job, now, drained=False))
    if updated is None:  # queued again already (a cancel cannot make it so: it is running)
        return job
    _settled(updated, now, outbox, released, conn)
    return updated


def _settled(
    job: Job, now: datetime, outbox: Outbox, released: list[Job], conn: Connection
) -> None:
    """An interrupted run settled: queued again (an event), or ended."""
    if job.state is JobState.QUEUED:
        outbox.record(conn, job, WebhookEvent.QUEUED, now)
    else:
        ended(job, now, outbox, released, conn)


def _interrupted(job: Job, now: datetime, *, drained: bool) -> dict[str, Any]:
    """The columns of a RUNNING job whose run ended without an outcome."""
    state, error = after_interruption(job, drained=drained)
    values: dict[str, Any] = {"state": str(state)}
    if state is JobState.QUEUED:
        values.update(devices=[], progress=None, started_at=None)
        if drained:
            values.update(attempt=job.attempt - 1)
    else:
        values.update(error_values(error), finished_at=now)
    return values
