"""Webhooks as values: the events a job's life emits, and where a job asks them sent."""

from __future__ import annotations

import enum
from dataclasses import dataclass


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
