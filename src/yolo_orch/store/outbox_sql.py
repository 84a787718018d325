"""The webhook outbox in the SQL database (SQLite or PostgreSQL): events inserted in the
transaction of the change that made them (`webhook_events`), tries recorded in batches
(`webhook_attempts`)."""

from __future__ import annotations

import functools
from collections import defaultdict
from typing import Any

from sqlalchemy import bindparam, delete, exists, func, insert, select, update
from sqlalchemy.engine import Connection

from yolo_orch.domain.webhook_routes import WebhookRoutes
from yolo_orch.domain.webhooks import Delivery, DeliveryAttempt, DeliveryState, OutboxEvent, Settled
from yolo_orch.store.database import Database
from yolo_orch.store.outbox import WebhookOutbox, delivery, outbox_event
from yolo_orch.store.outbox_tables import WEBHOOK_ATTEMPTS, WEBHOOK_EVENTS
from yolo_orch.store.tables import JOBS

_INSERT_EVENTS = insert(WEBHOOK_EVENTS)
_INSERT_ATTEMPTS = insert(WEBHOOK_ATTEMPTS)
_SETTLE = (
    update(WEBHOOK_EVENTS)
    .where(WEBHOOK_EVENTS.c.id == bindparam("event_id"))
    .values(
        state=bindparam("new_state"),
        attempts=bindparam("new_attempts"),
        next_at=bindparam("new_next_at"),
    )
)
_LAST_SEQ = select(func.max(WEBHOOK_EVENTS.c.seq))
PRUNE_SLICE = 5000
"""Events looked at by one write of `prune`."""
_PENDING = (
    select(WEBHOOK_EVENTS)
    .where(
        WEBHOOK_EVENTS.c.state == str(DeliveryState.PENDING),
        WEBHOOK_EVENTS.c.seq > bindparam("after_seq"),
    )
    .order_by(WEBHOOK_EVENTS.c.seq)
    .limit(bindparam("limit"))
)


class SqlOutbox(WebhookOutbox):
    def __init__(self, db: Database, routes: WebhookRoutes, *, progress_every_s: float) -> None:
        super().__init__(routes, progress_every_s)
        self._db = db

    def _keep(self, tx: Any, events: list[dict[str, Any]]) -> None:
        conn: Connection = tx
        conn.execute(_INSERT_EVENTS, events)

    async def pending(self, after_seq: int, limit: int) -> list[OutboxEvent]:
        params = {"after_seq": after_seq, "limit": limit}
        return await self._db.read(functools.partial(_pending, params))

    async def settle(self, settled: list[Settled]) -> None:
        # A try lost to a crash before the log's fsync is only sent again: no need to wait.
        await self._db.write(
            functools.partial(_settle, settled), fails_clean=True, answer_before_fsync=True
        )

    async def deliveries(self, job_id: str) -> list[Delivery]:
        return await self._db.read(functools.partial(_deliveries, job_id))

    async def prune(self) -> int:
        # In slices of `seq`, each a write of its own: no one write holds the writer long.
        last = await self._db.read(lambda conn: conn.execute(_LAST_SEQ).scalar())
        pruned = 0
        for start in range(1, (last or 0) + 1, PRUNE_SLICE):
            slice_ = functools.partial(_prune, start, start + PRUNE_SLICE)
            pruned += await self._db.write(slice_, fails_clean=True, answer_before_fsync=True)
        return pruned


def _prune(start: int, stop: int, conn: Connection) -> int:
    events = WEBHOOK_EVENTS.c
    gone = select(events.id).where(
        events.seq >= start,
        events.seq < stop,
        events.state != str(DeliveryState.PENDING),
        ~exists().where(JOBS.c.id == events.job_id),
    )
    ids = list(conn.execute(gone).scalars())
    if ids:
        conn.execute(delete(WEBHOOK_ATTEMPTS).where(WEBHOOK_ATTEMPTS.c.event_id.in_(ids)))
        conn.execute(delete(WEBHOOK_EVENTS).where(events.id.in_(ids)))
    return len(ids)


def _pending(params: dict[str, int], conn: Connection) -> list[OutboxEvent]:
    return [outbox_event(row) for row in conn.execute(_PENDING, params).mappings()]


def _settle(settled: list[Settled], conn: Connection) -> None:
    conn.execute(
        _SETTLE,
        [
            {
                "event_id": each.attempt.event_id,
                "new_state": str(each.state),
                "new_attempts": each.attempts,
                "new_next_at": each.next_at,
            }
            for each in settled
        ],
    )
    conn.execute(
        _INSERT_ATTEMPTS,
        [
            {
                "event_id": each.attempt.event_id,
                "job_id": each.attempt.job_id,
                "at": each.attempt.at,
                "status_code": each.attempt.status_code,
                "latency_ms": each.attempt.latency_ms,
                "error": each.attempt.error,
            }
            for each in settled
        ],
    )


def _deliveries(job_id: str, conn: Connection) -> list[Delivery]:
    attempts: dict[str, list[DeliveryAttempt]] = defaultdict(list)
    stmt = (
        select(WEBHOOK_ATTEMPTS)
        .where(WEBHOOK_ATTEMPTS.c.job_id == job_id)
        .order_by(WEBHOOK_ATTEMPTS.c.seq)
    )
    for row in conn.execute(stmt).mappings():
        attempts[row["event_id"]].append(
            DeliveryAttempt(
                event_id=row["event_id"],
                job_id=row["job_id"],
                at=row["at"],
                status_code=row["status_code"],
                latency_ms=row["latency_ms"],
                error=row["error"],
            )
        )
    stmt = (
        select(WEBHOOK_EVENTS)
        .where(WEBHOOK_EVENTS.c.job_id == job_id)
        .order_by(WEBHOOK_EVENTS.c.seq)
    )
    return [delivery(row, attempts[row["id"]]) for row in conn.execute(stmt).mappings()]
