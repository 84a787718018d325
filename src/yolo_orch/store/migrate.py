"""Alembic, driven from code: no alembic.ini, and the same scripts from a wheel or a checkout."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from yolo_orch.store.sqlite_db import sync_url

_PACKAGE = Path(__file__).resolve().parent.parent
_PACKAGED_SCRIPTS = _PACKAGE / "_migrations"
"""Where a wheel carries `migrations/` (pyproject force-includes it)."""
_SOURCE_SCRIPTS = _PACKAGE.parent.parent / "migrations"
"""`migrations/` of a source checkout (`src/yolo_orch/` -> repository root)."""


def _script_location() -> Path:
    for location in (_PACKAGED_SCRIPTS, _SOURCE_SCRIPTS):
        if (location / "env.py").is_file():
            return location
    raise FileNotFoundError(
        f"no migration scripts in {_PACKAGED_SCRIPTS} or {_SOURCE_SCRIPTS}; broken install?"
    )


def _scripts_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(_script_location()))
    return config


def alembic_config(database_url: str) -> Config:
    config = _scripts_config()
    # Config values pass through configparser interpolation, where "%" is special.
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def _database_file(database_url: str) -> Path | None:
    database = make_url(database_url).database
    return Path(database) if database and database != ":memory:" else None


def upgrade_to_head(database_url: str) -> None:
    """Blocking; run it in a thread from async code."""
    database = _database_file(database_url)
    if database is not None:
        database.parent.mkdir(parents=True, exist_ok=True)
    command.upgrade(alembic_config(database_url), "head")


def current_revision(database_url: str) -> str | None:
    """The revision the database is at; `None` for a database never migrated.

    A missing database file is left missing: asking must not create it.
    """
    database = _database_file(database_url)
    if database is not None and not database.exists():
        return None
    engine = create_engine(sync_url(database_url), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()


def head_revision() -> str:
    head = ScriptDirectory.from_config(_scripts_config()).get_current_head()
    if head is None:
        raise RuntimeError("the migration scripts define no revision")
    return head
