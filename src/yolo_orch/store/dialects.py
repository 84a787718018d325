"""What differs between the two SQL engines in the stores' own statements: only `INSERT ... ON
CONFLICT`, which SQLAlchemy builds per dialect (`sqlite.insert`, `postgresql.insert`; the SQL is
the same). A statement the stores build once at import is built once per dialect instead, on
first use (`PerDialect`), so that neither engine pays to build it on every op."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeAlias, TypeVar

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

ConflictInsert: TypeAlias = sqlite.Insert | postgresql.Insert
"""An INSERT that takes `on_conflict_do_nothing` / `on_conflict_do_update`."""
InsertFor: TypeAlias = Callable[[Table], ConflictInsert]

_INSERTS: dict[str, InsertFor] = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}

_T = TypeVar("_T")


def insert_for(conn: Connection) -> InsertFor:
    """`insert` of the connection's dialect."""
    return _INSERTS[conn.dialect.name]


class PerDialect(Generic[_T]):
    """A statement built by `build(insert)` once for each dialect it is run on."""

    def __init__(self, build: Callable[[InsertFor], _T]) -> None:
        self._build = build
        self._built: dict[str, _T] = {}

    def __call__(self, conn: Connection) -> _T:
        name = conn.dialect.name
        built = self._built.get(name)
        if built is None:
            built = self._built[name] = self._build(_INSERTS[name])
        return built
