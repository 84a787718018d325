"""The active head's lease (`store/head_lease.py`): used on PostgreSQL, where several heads share
one database; built on SQLite too, so that both engines have one history.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "head_lease",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column(
            "epoch", sa.Integer().with_variant(sa.BigInteger(), "postgresql"), nullable=False
        ),
        sa.Column("holder", sa.String(), nullable=False),
        sa.Column("url", sa.String(), nullable=False),
        sa.Column("lease_pid", sa.Integer(), nullable=False),
        sa.Column("writer_pid", sa.Integer(), nullable=False),
        sa.Column("expires_at_s", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )


def downgrade() -> None:
    op.drop_table("head_lease")
