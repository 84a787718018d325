"""Exported variants of registry models (ONNX, OpenVINO, TorchScript, TensorRT engines).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A new table: `jobs` and `models` stay as they are (no table copy).
    op.create_table(
        "model_variants",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("model_id", sa.String(), nullable=False),
        sa.Column("format", sa.String(), nullable=False),
        sa.Column("sha256", sa.String(), nullable=False),
        sa.Column(
            "size_bytes", sa.Integer().with_variant(sa.BigInteger(), "postgresql"), nullable=False
        ),
        sa.Column("files", sa.JSON(), nullable=False),
        sa.Column("lineage", sa.JSON(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("job_id", sa.String(), nullable=True),
        # Aware UTC as ISO-8601 text (tables.UTCDateTime), as in `jobs`.
        sa.Column("created_at", sa.String(), nullable=False),
        sa.Column("usable", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["model_id"], ["models.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("model_id", "sha256", name="uq_model_variants_sha256"),
    )
    op.create_index("ix_model_variants_model_id", "model_variants", ["model_id"])
    if op.get_bind().dialect.name == "postgresql":  # SQLite's implicit rowid (see 0002)
        op.execute(
            "ALTER TABLE model_variants ADD COLUMN rowid BIGINT GENERATED ALWAYS AS IDENTITY"
        )
    op.create_index("ix_model_variants_job_id", "model_variants", ["job_id"])


def downgrade() -> None:
    op.drop_index("ix_model_variants_job_id", table_name="model_variants")
    op.drop_index("ix_model_variants_model_id", table_name="model_variants")
    op.drop_table("model_variants")
