"""The durable database a `database_url` names: SQLite (`sqlite+aiosqlite:///PATH`) or
PostgreSQL (`postgresql+psycopg://...`). The stores run the same ops on either."""

from __future__ import annotations

from sqlalchemy.engine import make_url

from yolo_orch.store.database import Database
from yolo_orch.store.postgres_db import PostgresDatabase, postgres_url
from yolo_orch.store.sqlite_db import SQLiteDatabase, sync_url


def engine_url(database_url: str) -> str:
    """The URL SQLAlchemy (and Alembic) connect with, through the driver the stores use."""
    if make_url(database_url).get_backend_name() == "postgresql":
        return postgres_url(database_url)
    return sync_url(database_url)


def database_for(database_url: str) -> Database:
    """The database `database_url` names, not yet open."""
    if make_url(database_url).get_backend_name() == "postgresql":
        return PostgresDatabase(database_url)
    return SQLiteDatabase(database_url)
