"""The webhook outbox: `webhook_events` (committed in the transaction of the state change that
caused each) and `webhook_attempts` (each delivery try, for GET /v1/jobs/{id}/deliveries)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Index, Table
from sqlmodel import Field, SQLModel

from yolo_orch.store.tables import WIDE_INTEGER, UTCDateTime


class WebhookEventRow(SQLModel, table=True):
    __tablename__ = "webhook_events"
    __table_args__ = ({"sqlite_autoincrement": True},)

    seq: int | None = Field(default=None, primary_key=True, sa_type=WIDE_INTEGER)
    """Delivery order: per job and endpoint, an event is sent only once those before it are."""
    id: str = Field(unique=True)
    """The Standard Webhooks `webhook-id` (the same on every retry: receivers deduplicate)."""
    # No foreign key: a job deleted (or expired) before its events were delivered still has
    # them delivered.
    job_id: str = Field(index=True)
    url: str
    event: str
    payload: dict[str, Any] = Field(sa_type=JSON)
    created_at: datetime = Field(sa_type=UTCDateTime)
    state: str
    """`pending`, `delivered` or `failed` (given up after `webhook_retry_for_s`)."""
    attempts: int = 0
    next_at: datetime = Field(sa_type=UTCDateTime)


class WebhookAttemptRow(SQLModel, table=True):
    __tablename__ = "webhook_attempts"
    __table_args__ = ({"sqlite_autoincrement": True},)

    seq: int | None = Field(default=None, primary_key=True, sa_type=WIDE_INTEGER)
    event_id: str = Field(index=True)
    job_id: str = Field(index=True)
    at: datetime = Field(sa_type=UTCDateTime)
    status_code: int | None = None
    latency_ms: float
    error: str | None = None


WEBHOOK_EVENTS: Table = WebhookEventRow.metadata.tables["webhook_events"]
WEBHOOK_ATTEMPTS: Table = WebhookAttemptRow.metadata.tables["webhook_attempts"]

# The deliverer's read: pending events due first. Migration 0010 builds it.
Index("ix_webhook_events_state_next_at", WEBHOOK_EVENTS.c.state, WEBHOOK_EVENTS.c.next_at)
