"""Dependencies between jobs in the SQL stores (`domain.chains`): written with the waiting job,
settled in the transaction of the write that ends the job waited for. A waiting job is
`blocked` (the queue head skips it) while it has a row in `job_dependencies`."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, func, select, update
from sqlalchemy.engine import Connection

from yolo_orch.domain import Job, JobState, NewJob
from yolo_orch.domain.webhooks import WebhookEvent
from yolo_orch.errors import DependencyFailed, DependencyNotFound, ErrorCode
from yolo_orch.store.job_rows import QUEUED
from yolo_orch.store.outbox import Outbox
from yolo_orch.store.tables import JOB_DEPENDENCIES, JOBS, job_from_row


def pending_dependencies(new: NewJob, conn: Connection) -> list[tuple[str, bool]]:
    """The dependencies of `new` still to wait for, as rows to write once it is inserted.
    Those that ended already are settled now: refused (`DependencyFailed`) when `new` needs
    a success it cannot have. Raise `DependencyNotFound` for an unknown job. Writes nothing."""
    if not new.after:
        return []
    ids = [dep.job_id for dep in new.after]
    states = dict(conn.execute(select(JOBS.c.id, JOBS.c.state).where(JOBS.c.id.in_(ids))).all())
    pending = []
    for dep in new.after:
        state = states.get(dep.job_id)
        if state is None:
            raise DependencyNotFound(dep.job_id)
        ended = JobState(state)
        if not ended.is_terminal:
            pending.append((dep.job_id, dep.ok_only))
        elif not dep.released_by(ended is JobState.SUCCEEDED):
            raise DependencyFailed(dep.job_id, ended)
    return pending


def write_dependencies(job_id: str, pending: list[tuple[str, bool]], conn: Connection) -> None:
    if pending:
        rows = [{"job_id": job_id, "dep_id": dep, "ok_only": ok} for dep, ok in pending]
        conn.execute(JOB_DEPENDENCIES.insert(), rows)


def release_dependents(
    ended: Job, now: datetime, outbox: Outbox, conn: Connection, changed: list[Job]
) -> None:
    """`ended` (terminal) no longer holds the jobs waiting for it: each is cancelled
    (`dependency_failed`) if it needed a success `ended` is not, else unblocked once it waits
    for nothing more. A cancelled one releases its own dependents in turn. Every job changed is
    appended to `changed`. One indexed read when nothing waits for `ended`."""
    todo = [ended]
    while todo:
        job = todo.pop()
        waiting = conn.execute(
            select(JOB_DEPENDENCIES.c.job_id, JOB_DEPENDENCIES.c.ok_only).where(
                JOB_DEPENDENCIES.c.dep_id == job.id
            )
        ).all()
        if not waiting:
            continue
        conn.execute(delete(JOB_DEPENDENCIES).where(JOB_DEPENDENCIES.c.dep_id == job.id))
        succeeded = job.state is JobState.SUCCEEDED
        for waiter_id, ok_only in waiting:
            if ok_only and not succeeded:
                cancelled = _cancel_waiter(waiter_id, job, now, conn)
                if cancelled is not None:
                    outbox.record(conn, cancelled, WebhookEvent.CANCELLED, now)
                    changed.append(cancelled)
                    todo.append(cancelled)
            elif not _still_waits(waiter_id, conn):
                unblocked = _update(conn, waiter_id, blocked=False)
                if unblocked is not None:
                    changed.append(unblocked)


def _cancel_waiter(waiter_id: str, ended: Job, now: datetime, conn: Connection) -> Job | None:
    conn.execute(delete(JOB_DEPENDENCIES).where(JOB_DEPENDENCIES.c.job_id == waiter_id))
    message = f"job {ended.id}, which it waited for with after_ok, is {ended.state}"
    return _update(
        conn,
        waiter_id,
        state=str(JobState.CANCELLED),
        blocked=False,
        error_code=str(ErrorCode.DEPENDENCY_FAILED),
        error_message=message,
        finished_at=now,
    )


def _still_waits(job_id: str, conn: Connection) -> bool:
    count = conn.execute(
        select(func.count()).where(JOB_DEPENDENCIES.c.job_id == job_id)
    ).scalar_one()
    return bool(count)


def _update(conn: Connection, job_id: str, **values: object) -> Job | None:
    """A QUEUED job changed, or None if it is queued no more (cancelled meanwhile)."""
    stmt = update(JOBS).where(JOBS.c.id == job_id, QUEUED).values(**values).returning(*JOBS.c)
    row = conn.execute(stmt).mappings().first()
    return None if row is None else job_from_row(row)
