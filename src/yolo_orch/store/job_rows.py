"""The single-job statements the store's ops share: a job's row, its state, an update of it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.engine import Connection

from yolo_orch.domain import Job, JobState
from yolo_orch.errors import JobNotFound
from yolo_orch.store.tables import JOBS, job_from_row

QUEUED = JOBS.c.state == str(JobState.QUEUED)
RUNNING = JOBS.c.state == str(JobState.RUNNING)
TERMINAL_STATES = [str(state) for state in JobState if state.is_terminal]
ACTIVE = or_(*(JOBS.c.state == str(state) for state in JobState if not state.is_terminal))
"""Comparisons, not `NOT IN (...)`: SQLAlchemy expands an IN list's parameters at every
execution, which made up 40 % of the outcome's statement on the writer's thread."""


def get_job(job_id: str, conn: Connection) -> Job:
    row = conn.execute(select(JOBS).where(JOBS.c.id == job_id)).mappings().first()
    if row is None:
        raise JobNotFound(job_id)
    return job_from_row(row)


def update_job(conn: Connection, job_id: str, *where: Any, **values: Any) -> Job | None:
    stmt = update(JOBS).where(JOBS.c.id == job_id, *where).values(**values).returning(*JOBS.c)
    row = conn.execute(stmt).mappings().first()
    return job_from_row(row) if row is not None else None


def state_of(conn: Connection, job_id: str) -> JobState:
    state = conn.execute(select(JOBS.c.state).where(JOBS.c.id == job_id)).scalar()
    if state is None:
        raise JobNotFound(job_id)
    return JobState(state)
