"""Why a variant was retired: its files changed, or it failed consecutive jobs.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A nullable column is added in place (SQLite's ADD COLUMN): no table copy. Variants retired
    # before have none: their reason was not kept.
    op.add_column("model_variants", sa.Column("unusable_reason", sa.String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("model_variants") as batch:
        batch.drop_column("unusable_reason")
