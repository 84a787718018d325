"""Every table of the database, in one metadata: what the migrations must build exactly."""

from __future__ import annotations

from sqlalchemy import MetaData
from sqlmodel import SQLModel

# Imported for their tables: each row class registers itself in SQLModel's metadata.
from yolo_orch.store import alias_tables, head_lease, outbox_tables, tables  # noqa: F401

METADATA: MetaData = SQLModel.metadata
