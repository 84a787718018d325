"""Where the job stores put the webhook events of a state change: in the same transaction as
the change (the outbox pattern), so an event is committed exactly when its change is.

The job stores call `Outbox.record` inside each write that changes a job, with that write's
own transaction handle, and `Outbox.committed` once the write is durable, to wake delivery.
The outbox decides from the job (its own webhook, the server's filters) whether anyone wants
the event; when no one does it writes nothing, so jobs without webhooks pay nothing more."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from yolo_orch.domain import Job
from yolo_orch.domain.webhooks import WebhookEvent


class Outbox:
    """Records nothing: a server with no webhooks. The webhook outboxes override both methods."""

    active = False
    """Whether `record` may keep anything: the stores read a job back for an event only then."""

    def record(self, tx: Any, job: Job, event: WebhookEvent, now: datetime) -> bool:
        """Keep `event` of `job` (as the change left it) for delivery, in `tx` (a SQLAlchemy
        `Connection` in a SQLite store's write; None in the memory store). Return whether it
        kept anything. Runs on the store's writer: must not block, and must not raise but for
        a database error (which fails the write, change and event together)."""
        return False

    def committed(self) -> None:
        """Writes that recorded events are durable now: deliver them. Called on the event loop."""


NO_OUTBOX = Outbox()
