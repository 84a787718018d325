"""The webhook outbox: events committed with the state changes that caused them, and each
delivery attempt.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "webhook_events",
        sa.Column("seq", sa.Integer().with_variant(sa.BigInteger(), "postgresql"), nullable=False),
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("job_id", sa.String(), nullable=False),
        sa.Column("url", sa.String(), nullable=False),
        sa.Column("event", sa.String(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.String(), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_at", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("seq"),
        sa.UniqueConstraint("id"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_webhook_events_job_id", "webhook_events", ["job_id"])
    op.create_index("ix_webhook_events_state_next_at", "webhook_events", ["state", "next_at"])
    op.create_table(
        "webhook_attempts",
        sa.Column("seq", sa.Integer().with_variant(sa.BigInteger(), "postgresql"), nullable=False),
        sa.Column("event_id", sa.String(), nullable=False),
        sa.Column("job_id", sa.String(), nullable=False),
        sa.Column("at", sa.String(), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("error", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("seq"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_webhook_attempts_event_id", "webhook_attempts", ["event_id"])
    op.create_index("ix_webhook_attempts_job_id", "webhook_attempts", ["job_id"])


def downgrade() -> None:
    op.drop_index("ix_webhook_attempts_job_id", table_name="webhook_attempts")
    op.drop_index("ix_webhook_attempts_event_id", table_name="webhook_attempts")
    op.drop_table("webhook_attempts")
    op.drop_index("ix_webhook_events_state_next_at", table_name="webhook_events")
    op.drop_index("ix_webhook_events_job_id", table_name="webhook_events")
    op.drop_table("webhook_events")
