"""Model aliases (`name@alias`) and the history of their moves.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "model_aliases",
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("alias", sa.String(), nullable=False),
        sa.Column("model_id", sa.String(), nullable=False),
        # Aware UTC as ISO-8601 text (tables.UTCDateTime), as in `jobs`.
        sa.Column("updated_at", sa.String(), nullable=False),
        sa.Column("updated_by", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(["model_id"], ["models.id"], ondelete="RESTRICT"),
        sa.PrimaryKeyConstraint("name", "alias"),
    )
    op.create_index("ix_model_aliases_model_id", "model_aliases", ["model_id"])
    op.create_table(
        "model_alias_history",
        sa.Column("seq", sa.Integer().with_variant(sa.BigInteger(), "postgresql"), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("alias", sa.String(), nullable=False),
        sa.Column("from_model_id", sa.String(), nullable=True),
        sa.Column("to_model_id", sa.String(), nullable=True),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("reason", sa.String(), nullable=True),
        sa.Column("at", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("seq"),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_model_alias_history_alias_seq", "model_alias_history", ["name", "alias", "seq"]
    )


def downgrade() -> None:
    op.drop_index("ix_model_alias_history_alias_seq", table_name="model_alias_history")
    op.drop_table("model_alias_history")
    op.drop_index("ix_model_aliases_model_id", table_name="model_aliases")
    op.drop_table("model_aliases")
