"""Jobs that wait for others (`after`, chains), unique keys and per-job webhooks.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable columns, and one with a constant default, are added in place (SQLite's ADD
    # COLUMN): no copy of a long history.
    op.add_column("jobs", sa.Column("parent_id", sa.String(), nullable=True))
    op.add_column("jobs", sa.Column("chain_id", sa.String(), nullable=True))
    op.add_column("jobs", sa.Column("unique_key", sa.String(), nullable=True))
    op.add_column("jobs", sa.Column("webhook", sa.JSON(), nullable=True))
    op.add_column(
        "jobs", sa.Column("blocked", sa.Boolean(), nullable=False, server_default=sa.false())
    )
    op.create_index("ix_jobs_parent_id", "jobs", ["parent_id"])
    op.create_index("ix_jobs_chain_id", "jobs", ["chain_id"])
    op.create_index("ix_jobs_unique_key", "jobs", ["unique_key"])
    op.create_table(
        "job_dependencies",
        sa.Column("job_id", sa.String(), nullable=False),
        sa.Column("dep_id", sa.String(), nullable=False),
        sa.Column("ok_only", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "dep_id"),
    )
    op.create_index("ix_job_dependencies_dep_id", "job_dependencies", ["dep_id"])


def downgrade() -> None:
    op.drop_index("ix_job_dependencies_dep_id", table_name="job_dependencies")
    op.drop_table("job_dependencies")
    op.drop_index("ix_jobs_unique_key", table_name="jobs")
    op.drop_index("ix_jobs_chain_id", table_name="jobs")
    op.drop_index("ix_jobs_parent_id", table_name="jobs")
    # SQLite's own DROP COLUMN (3.35+), not a batch copy: a copy of `jobs` would lose the
    # triggers that keep `job_counts` (migration 0004).
    for column in ("blocked", "webhook", "unique_key", "chain_id", "parent_id"):
        op.execute(f"ALTER TABLE jobs DROP COLUMN {column}")
