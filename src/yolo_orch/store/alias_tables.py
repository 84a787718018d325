"""The `model_aliases` table (where each `name@alias` points now) and `model_alias_history`
(every move, kept)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, Table
from sqlmodel import Field, SQLModel

from yolo_orch.store.tables import WIDE_INTEGER, UTCDateTime


class AliasRow(SQLModel, table=True):
    __tablename__ = "model_aliases"

    name: str = Field(primary_key=True)
    alias: str = Field(primary_key=True)
    # RESTRICT: a model an alias points to is not deleted from under it (the registry refuses
    # first, with the alias named).
    model_id: str = Field(foreign_key="models.id", ondelete="RESTRICT", index=True)
    updated_at: datetime = Field(sa_type=UTCDateTime)
    updated_by: str


class AliasHistoryRow(SQLModel, table=True):
    __tablename__ = "model_alias_history"
    __table_args__ = ({"sqlite_autoincrement": True},)

    seq: int | None = Field(default=None, primary_key=True, sa_type=WIDE_INTEGER)
    name: str
    alias: str
    from_model_id: str | None = None
    """None: the alias was made by this move."""
    to_model_id: str | None = None
    """None: the alias was deleted by this move."""
    actor: str
    """Who moved it: the API key's name, or `chain:<job id>` for a chain's promotion."""
    reason: str | None = None
    at: datetime = Field(sa_type=UTCDateTime)


ALIASES: Table = AliasRow.metadata.tables["model_aliases"]
ALIAS_HISTORY: Table = AliasHistoryRow.metadata.tables["model_alias_history"]

# One alias's history, in order, without a scan. Migration 0009 builds it.
Index(
    "ix_model_alias_history_alias_seq",
    ALIAS_HISTORY.c.name,
    ALIAS_HISTORY.c.alias,
    ALIAS_HISTORY.c.seq,
)
