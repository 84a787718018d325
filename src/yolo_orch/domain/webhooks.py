"""Webhooks as values: the events a job's life emits, and where a job asks them sent."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime


class WebhookEvent(enum.StrEnum):
    """What happened to a job. The state events are committed with the state change itself
    (the outbox), so none is lost or sent for a change that did not happen."""

    QUEUED = "queued"
    STARTED = "started"
    PROGRESS = "progress"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_EVENTS = frozenset({WebhookEvent.SUCCEEDED, WebhookEvent.FAILED, WebhookEvent.CANCELLED})
COMPLETED = "completed"
"""An events filter's shorthand for every terminal event."""


@dataclass(frozen=True)
class WebhookTarget:
    """A job's own webhook: its URL and the events it wants (all, when empty)."""

    url: str
    events: frozenset[WebhookEvent] = frozenset()

    def wants(self, event: WebhookEvent) -> bool:
        return not self.events or event in self.events

    def stored(self) -> dict[str, object]:
        return {"url": self.url, "events": sorted(self.events)}

    @classmethod
    def from_stored(cls, stored: dict[str, object]) -> WebhookTarget:
        events = stored.get("events") or []
        assert isinstance(events, list)
        return cls(url=str(stored["url"]), events=frozenset(WebhookEvent(e) for e in events))


def events_of(names: Iterable[str]) -> frozenset[WebhookEvent]:
    """An events filter as written (event names, `completed` for every terminal one): what
    a `WebhookTarget` or a server endpoint keeps. Raises ValueError naming an unknown one."""
    events: set[WebhookEvent] = set()
    for name in names:
        if name == COMPLETED:
            events |= TERMINAL_EVENTS
            continue
        try:
            events.add(WebhookEvent(name))
        except ValueError:
            known = ", ".join([*WebhookEvent, COMPLETED])
            raise ValueError(f"webhook event {name!r} is none of {known}") from None
    return frozenset(events)


@dataclass(frozen=True)
class WebhookEndpoint:
    """A server-wide webhook (`webhooks` in the settings): the events of the jobs its filters
    take, each filter taking all when empty. `models` names models as jobs name them (`name`,
    `name@alias`) or by the id they ran."""

    url: str
    events: frozenset[WebhookEvent] = frozenset()
    kinds: frozenset[str] = frozenset()
    models: frozenset[str] = frozenset()

    def wants(self, kind: str, models: tuple[str | None, ...], event: WebhookEvent) -> bool:
        return (
            (not self.events or event in self.events)
            and (not self.kinds or kind in self.kinds)
            and (not self.models or any(model in self.models for model in models))
        )


class DeliveryState(enum.StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"
    """Given up: no 2xx answer within `webhook_retry_for_s` of the event."""


@dataclass(frozen=True)
class OutboxEvent:
    """An event kept for one URL, as the deliverer reads it back: `id` is the Standard Webhooks
    `webhook-id`, the same on every try, so that receivers can drop a repeat."""

    seq: int
    id: str
    job_id: str
    url: str
    event: WebhookEvent
    body: bytes
    created_at: datetime
    attempts: int
    next_at: datetime


@dataclass(frozen=True)
class DeliveryAttempt:
    """One try: the answer's status (None when none came), how long it took, and why it failed
    (a timeout, a refused connection, a host not allowed; None on a 2xx)."""

    event_id: str
    job_id: str
    at: datetime
    status_code: int | None
    latency_ms: float
    error: str | None


@dataclass(frozen=True)
class Settled:
    """What an attempt leaves of its event: its state, and when to try again if pending."""

    attempt: DeliveryAttempt
    state: DeliveryState
    attempts: int
    next_at: datetime


@dataclass(frozen=True)
class Delivery:
    """An event of a job for one URL, with its tries (GET /v1/jobs/{id}/deliveries)."""

    id: str
    url: str
    event: WebhookEvent
    state: DeliveryState
    created_at: datetime
    next_at: datetime | None
    attempts: tuple[DeliveryAttempt, ...]
