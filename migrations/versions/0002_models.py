"""The models table (the weights registry) and the model each job runs.

Revision ID: 0002
Revises: 0001
Create Date: 2025-01-02
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import sqlalchemy as sa
from alembic import op
from alembic.operations import BatchOperations

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "models",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("sha256", sa.String(), nullable=False),
        sa.Column(
            "size_bytes", sa.Integer().with_variant(sa.BigInteger(), "postgresql"), nullable=False
        ),
        sa.Column("task", sa.String(), nullable=False),
        sa.Column("class_names", sa.JSON(), nullable=False),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("file_name", sa.String(), nullable=False),
        # Aware UTC as ISO-8601 text (tables.UTCDateTime), as in `jobs`.
        sa.Column("created_at", sa.String(), nullable=False),
        sa.Column("usable", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_models_name", "models", ["name"], unique=True)
    op.create_index("ix_models_sha256", "models", ["sha256"], unique=True)
    _rowid_on_postgres("models")
    # SQLite cannot add a foreign key to a table in place, so batch mode copies `jobs`.
    last_seq = _last_jobs_seq()
    with _copying_jobs() as batch:
        batch.add_column(sa.Column("model_id", sa.String(), nullable=True))
        batch.create_foreign_key(
            "fk_jobs_model_id_models", "models", ["model_id"], ["id"], ondelete="SET NULL"
        )
        batch.create_index("ix_jobs_model_id", ["model_id"])
    _restore_jobs_seq(last_seq)


def downgrade() -> None:
    last_seq = _last_jobs_seq()
    with _copying_jobs() as batch:
        batch.drop_index("ix_jobs_model_id")
        batch.drop_constraint("fk_jobs_model_id_models", type_="foreignkey")
        batch.drop_column("model_id")
    _restore_jobs_seq(last_seq)
    op.drop_index("ix_models_sha256", table_name="models")
    op.drop_index("ix_models_name", table_name="models")
    op.drop_table("models")


# A seq is never reused (pagination cursors rely on it). The copy must therefore restate
# AUTOINCREMENT, which reflection does not see, and carry over SQLite's counter, which it would
# otherwise reset to the highest seq copied.


@contextmanager
def _copying_jobs() -> Iterator[BatchOperations]:
    with op.batch_alter_table("jobs", table_kwargs={"sqlite_autoincrement": True}) as batch:
        yield batch


def _rowid_on_postgres(table: str) -> None:
    """The model store breaks ties in `created_at` by `rowid`, which every SQLite table has
    (one above the largest so far, per insert): PostgreSQL's tables get such a column."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE {table} ADD COLUMN rowid BIGINT GENERATED ALWAYS AS IDENTITY")


def _on_sqlite() -> bool:
    return op.get_bind().dialect.name == "sqlite"


def _last_jobs_seq() -> int | None:
    # SQLite's table copy (batch mode) loses the AUTOINCREMENT counter; PostgreSQL alters the
    # table in place and its sequence goes on.
    if not _on_sqlite():
        return None
    query = sa.text("SELECT seq FROM sqlite_sequence WHERE name = 'jobs'")
    last: int | None = op.get_bind().scalar(query)
    return last


def _restore_jobs_seq(last_seq: int | None) -> None:
    if last_seq is None:
        return
    op.execute("DELETE FROM sqlite_sequence WHERE name = 'jobs'")
    op.execute(
        sa.text("INSERT INTO sqlite_sequence (name, seq) VALUES ('jobs', :seq)").bindparams(
            seq=last_seq
        )
    )
