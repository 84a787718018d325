"""Where the job stores put the webhook events of a state change: in the same transaction as
the change (the outbox pattern), so an event is committed exactly when its change is.

The job stores call `Outbox.record` inside each write that changes a job, with that write's
own transaction handle, and `Outbox.committed` once the write is durable, to wake delivery.
The outbox decides from the job (its own webhook, the server's filters) whether anyone wants
the event; when no one does it writes nothing, so jobs without webhooks pay nothing more."""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

import orjson

from yolo_orch.domain import Job, JsonObject
from yolo_orch.domain.webhook_routes import WebhookRoutes, webhook_payload
from yolo_orch.domain.webhooks import (
    TERMINAL_EVENTS,
    Delivery,
    DeliveryAttempt,
    DeliveryState,
    OutboxEvent,
    Settled,
    WebhookEvent,
)


class Outbox:
    """Records nothing: a server with no webhooks. The webhook outboxes override both methods."""

    active = False
    """Whether `record` may keep anything: the stores read a job back for an event only then."""

    def record(self, tx: Any, job: Job, event: WebhookEvent, now: datetime) -> bool:
        """Keep `event` of `job` (as the change left it) for delivery, in `tx` (a SQLAlchemy
        `Connection` in a SQL store's write; None in the memory store). Return whether it
        kept anything. Runs on the store's writer: must not block, and must not raise but for
        a database error (which fails the write, change and event together)."""
        return False

    def committed(self) -> None:
        """Writes that recorded events are durable now: deliver them. Called on the event loop."""


NO_OUTBOX = Outbox()


def _nothing() -> None:
    """No deliverer listens yet."""


class WebhookOutbox(Outbox, ABC):
    """Keeps the events someone wants (`WebhookRoutes`), thinning progress to one per
    `progress_every_s` per job, for the deliverer, which reads them back in order
    (`pending`), records each try (`settle`) and is woken by `committed`. The SQL and the
    memory outboxes keep them in their stores' transactions."""

    active = True

    def __init__(self, routes: WebhookRoutes, progress_every_s: float) -> None:
        self._routes = routes
        self._progress_every = timedelta(seconds=progress_every_s)
        self._last_progress: dict[str, datetime] = {}
        """Job id -> when its last progress event was kept (until the job ends; lost at a
        restart, which costs at most one progress event more per running job)."""
        self._wake: Callable[[], None] = _nothing

    def on_commit(self, wake: Callable[[], None]) -> None:
        """`wake` is called on the event loop once recorded events are committed."""
        self._wake = wake

    def committed(self) -> None:
        self._wake()

    def record(self, tx: Any, job: Job, event: WebhookEvent, now: datetime) -> bool:
        urls = self._routes.urls(job, event)
        if event in TERMINAL_EVENTS:
            self._last_progress.pop(job.id, None)
        if not urls:
            return False
        if event is WebhookEvent.PROGRESS:
            last = self._last_progress.get(job.id)
            if last is not None and now - last < self._progress_every:
                return False
            self._last_progress[job.id] = now
        payload = webhook_payload(job, event, now)
        self._keep(tx, [new_event(job.id, url, event, payload, now) for url in urls])
        return True

    @abstractmethod
    def _keep(self, tx: Any, events: list[dict[str, Any]]) -> None:
        """Add `events` (rows of `webhook_events`) in the store's transaction `tx`."""

    @abstractmethod
    async def pending(self, after_seq: int, limit: int) -> list[OutboxEvent]:
        """Up to `limit` events still to deliver with a `seq` above `after_seq`, in order."""

    @abstractmethod
    async def settle(self, settled: list[Settled]) -> None:
        """Record tries: each attempt, and its event's state, tries and next time."""

    @abstractmethod
    async def deliveries(self, job_id: str) -> list[Delivery]:
        """The events kept for `job_id`, in order, each with its tries."""

    async def prune(self) -> int:
        """Forget the delivered and failed events of jobs that are gone (deleted, expired),
        with their tries; how many. The memory outbox keeps them, as its store keeps jobs."""
        return 0


def new_event(
    job_id: str, url: str, event: WebhookEvent, payload: JsonObject, now: datetime
) -> dict[str, Any]:
    """A row of `webhook_events`, due at once."""
    return {
        "id": f"msg_{uuid.uuid4().hex}",
        "job_id": job_id,
        "url": url,
        "event": str(event),
        "payload": payload,
        "created_at": now,
        "state": str(DeliveryState.PENDING),
        "attempts": 0,
        "next_at": now,
    }


def outbox_event(row: Mapping[Any, Any]) -> OutboxEvent:
    """A row of `webhook_events` as the deliverer sends it: the body is the payload's JSON,
    the same bytes on every try."""
    return OutboxEvent(
        seq=row["seq"],
        id=row["id"],
        job_id=row["job_id"],
        url=row["url"],
        event=WebhookEvent(row["event"]),
        body=orjson.dumps(row["payload"]),
        created_at=row["created_at"],
        attempts=row["attempts"],
        next_at=row["next_at"],
    )


def delivery(row: Mapping[Any, Any], attempts: list[DeliveryAttempt]) -> Delivery:
    state = DeliveryState(row["state"])
    return Delivery(
        id=row["id"],
        url=row["url"],
        event=WebhookEvent(row["event"]),
        state=state,
        created_at=row["created_at"],
        next_at=row["next_at"] if state is DeliveryState.PENDING else None,
        attempts=tuple(attempts),
    )
