"""Alembic, driven from code: no alembic.ini, and the same scripts from a wheel or a checkout.

Alembic is imported only where it runs: importing it costs a quarter of a second (its dialects,
mako, pygments), so a start-up on a database already at `SCHEMA_REVISION` does without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

from yolo_orch.store.databases import engine_url

if TYPE_CHECKING:
    from alembic.config import Config

SCHEMA_REVISION = "0011"
"""The revision the table classes (`store/schema.py`) describe: the head of `migrations/`
(`tests/integration/test_migrations.py` holds the two equal, so a new migration bumps it)."""

_VERSION_TABLE = "alembic_version"
"""Where alembic keeps a database's revision (its default `version_table`)."""

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
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(_script_location()))
    return config


def alembic_config(database_url: str) -> Config:
    config = _scripts_config()
    # Config values pass through configparser interpolation, where "%" is special.
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def _database_file(database_url: str) -> Path | None:
    """A SQLite database's file; None for PostgreSQL's (or SQLite's in memory)."""
    parsed = make_url(database_url)
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database
    return Path(database) if database and database != ":memory:" else None


def upgrade_to_head(database_url: str) -> None:
    """Blocking; run it in a thread from async code."""
    from alembic import command

    database = _database_file(database_url)
    if database is not None:
        database.parent.mkdir(parents=True, exist_ok=True)
    command.upgrade(alembic_config(database_url), "head")


def current_revision(database_url: str) -> str | None:
    """The revision the database is at; `None` for a database never migrated.

    A missing database file is left missing: asking must not create it. Read from alembic's
    version table directly (one row on this linear history), without importing alembic.
    """
    database = _database_file(database_url)
    if database is not None and not database.exists():
        return None
    engine = create_engine(engine_url(database_url), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            if not inspect(conn).has_table(_VERSION_TABLE):
                return None
            revision: str | None = conn.execute(
                text(f"SELECT version_num FROM {_VERSION_TABLE}")
            ).scalar_one_or_none()
            return revision
    finally:
        engine.dispose()


def unreachable(database_url: str) -> str | None:
    """Why the database cannot be reached, in the driver's words and with what to check; None
    when it can. Asked once before the server starts, so that a wrong URL or a database not
    created yet is one line, not the lifespan's traceback."""
    try:
        current_revision(database_url)
    except OperationalError as exc:
        said = "; ".join(line.strip() for line in str(exc.orig or exc).splitlines() if line.strip())
        shown = make_url(database_url).render_as_string(hide_password=True)
        ended = said if said.endswith((".", "?", "!")) else f"{said}."
        return (
            f"cannot open the database {shown}: {ended} Check database_url; a PostgreSQL "
            "database must exist first (createdb --locale=C --template=template0 NAME)"
        )
    return None


def head_revision() -> str:
    """The newest revision of the migration scripts, as alembic reads them."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(_scripts_config()).get_current_head()
    if head is None:
        raise RuntimeError("the migration scripts define no revision")
    return head
