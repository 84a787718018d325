"""Dependencies between jobs in the memory store, as `sql_deps.py` keeps them in SQL: the
same rules, on the `InMemoryDatabase`'s `dependencies` (waiting job id -> {job id: ok_only})."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from yolo_orch.domain import Job, JobError, JobState, NewJob
from yolo_orch.domain.webhooks import WebhookEvent
from yolo_orch.errors import DependencyFailed, DependencyNotFound, ErrorCode
from yolo_orch.store.outbox import Outbox

Waits = dict[str, dict[str, bool]]


def pending_dependencies(new: NewJob, jobs: dict[str, Job]) -> dict[str, bool]:
    """As `sql_deps.pending_dependencies`: those of `new.after` still to wait for."""
    pending = {}
    for dep in new.after:
        job = jobs.get(dep.job_id)
        if job is None:
            raise DependencyNotFound(dep.job_id)
        if not job.state.is_terminal:
            pending[dep.job_id] = dep.ok_only
        elif not dep.released_by(job.state is JobState.SUCCEEDED):
            raise DependencyFailed(dep.job_id, job.state)
    return pending


def release_dependents(
    ended: Job,
    now: datetime,
    waits: Waits,
    jobs: dict[str, Job],
    put: Callable[[Job], Job],
    outbox: Outbox,
    changed: list[Job],
) -> None:
    """As `sql_deps.release_dependents`."""
    todo = [ended]
    while todo:
        job = todo.pop()
        succeeded = job.state is JobState.SUCCEEDED
        for waiter_id in [waiter for waiter, deps in waits.items() if job.id in deps]:
            ok_only = waits[waiter_id].pop(job.id)
            waiter = jobs[waiter_id]
            if waiter.state is not JobState.QUEUED:
                continue
            if ok_only and not succeeded:
                waits.pop(waiter_id)
                message = f"job {job.id}, which it waited for with after_ok, is {job.state}"
                cancelled = put(
                    replace(
                        waiter,
                        state=JobState.CANCELLED,
                        blocked=False,
                        error=JobError(ErrorCode.DEPENDENCY_FAILED, message),
                        finished_at=now,
                    )
                )
                outbox.record(None, cancelled, WebhookEvent.CANCELLED, now)
                changed.append(cancelled)
                todo.append(cancelled)
            elif not waits[waiter_id]:
                waits.pop(waiter_id)
                changed.append(put(replace(waiter, blocked=False)))
