"""The durable alias store, on the `Database` the job and model stores use: each move is one
op in their write queue, so the alias's row and its history entry commit together, and a
model's delete (`sql_models`) sees every alias committed before it."""

from __future__ import annotations

import functools
from datetime import datetime

from sqlalchemy import RowMapping, delete, insert, select
from sqlalchemy.engine import Connection

from yolo_orch.domain.aliases import ANY_TARGET, Alias, AliasMove, Expected
from yolo_orch.errors import AliasMoved, AliasNotFound, ModelNotFound
from yolo_orch.store.alias_tables import ALIAS_HISTORY, ALIASES
from yolo_orch.store.aliases import AliasStore
from yolo_orch.store.database import Database
from yolo_orch.store.dialects import insert_for
from yolo_orch.store.tables import MODELS

_BY_NAME = (ALIASES.c.name, ALIASES.c.alias)


class SqlAliasStore(AliasStore):
    def __init__(self, db: Database) -> None:
        self._db = db

    async def move(
        self,
        name: str,
        alias: str,
        model_id: str,
        *,
        actor: str,
        reason: str | None,
        now: datetime,
        expected_model_id: Expected = ANY_TARGET,
    ) -> tuple[Alias, AliasMove]:
        op = functools.partial(_move, name, alias, model_id, actor, reason, now, expected_model_id)
        return await self._db.write(op, fails_clean=True)

    async def get(self, name: str, alias: str) -> Alias:
        row = await self._db.read(functools.partial(_current, name, alias))
        if row is None:
            raise AliasNotFound(name, alias)
        return _alias(row)

    async def list_aliases(self, name: str | None = None) -> list[Alias]:
        stmt = select(ALIASES).order_by(*_BY_NAME)
        if name is not None:
            stmt = stmt.where(ALIASES.c.name == name)
        rows = await self._db.read(lambda conn: conn.execute(stmt).mappings().all())
        return [_alias(row) for row in rows]

    async def pointing_to(self, model_id: str) -> list[Alias]:
        stmt = select(ALIASES).where(ALIASES.c.model_id == model_id).order_by(*_BY_NAME)
        rows = await self._db.read(lambda conn: conn.execute(stmt).mappings().all())
        return [_alias(row) for row in rows]

    async def delete(self, name: str, alias: str, *, actor: str, now: datetime) -> AliasMove:
        op = functools.partial(_delete, name, alias, actor, now)
        return await self._db.write(op, fails_clean=True)

    async def history(
        self, name: str, alias: str, *, limit: int, before_seq: int | None = None
    ) -> list[AliasMove]:
        # Newest first through the index on (name, alias, seq).
        stmt = (
            select(ALIAS_HISTORY)
            .where(ALIAS_HISTORY.c.name == name, ALIAS_HISTORY.c.alias == alias)
            .order_by(ALIAS_HISTORY.c.seq.desc())
            .limit(limit)
        )
        if before_seq is not None:
            stmt = stmt.where(ALIAS_HISTORY.c.seq < before_seq)
        rows = await self._db.read(lambda conn: conn.execute(stmt).mappings().all())
        return [_move_of(row) for row in rows]


# The ops (see `Database.read` and `.write`): each raises its refusals before it writes.


def _current(name: str, alias: str, conn: Connection) -> RowMapping | None:
    stmt = select(ALIASES).where(ALIASES.c.name == name, ALIASES.c.alias == alias)
    return conn.execute(stmt).mappings().first()


def _move(
    name: str,
    alias: str,
    model_id: str,
    actor: str,
    reason: str | None,
    now: datetime,
    expected: Expected,
    conn: Connection,
) -> tuple[Alias, AliasMove]:
    row = _current(name, alias, conn)
    current = None if row is None else row["model_id"]
    if expected is not ANY_TARGET and expected != current:
        raise AliasMoved(name, alias, expected, current)
    if conn.execute(select(MODELS.c.id).where(MODELS.c.id == model_id)).first() is None:
        raise ModelNotFound(model_id)
    values = {"model_id": model_id, "updated_at": now, "updated_by": actor}
    upsert = (
        insert_for(conn)(ALIASES)
        .values(name=name, alias=alias, **values)
        .on_conflict_do_update(index_elements=list(_BY_NAME), set_=values)
        .returning(*ALIASES.c)
    )
    moved = _alias(conn.execute(upsert).mappings().one())
    return moved, _record(conn, name, alias, current, model_id, actor, reason, now)


def _delete(name: str, alias: str, actor: str, now: datetime, conn: Connection) -> AliasMove:
    row = _current(name, alias, conn)
    if row is None:
        raise AliasNotFound(name, alias)
    conn.execute(delete(ALIASES).where(ALIASES.c.name == name, ALIASES.c.alias == alias))
    return _record(conn, name, alias, row["model_id"], None, actor, None, now)


def _record(
    conn: Connection,
    name: str,
    alias: str,
    from_model_id: str | None,
    to_model_id: str | None,
    actor: str,
    reason: str | None,
    now: datetime,
) -> AliasMove:
    stmt = (
        insert(ALIAS_HISTORY)
        .values(
            name=name,
            alias=alias,
            from_model_id=from_model_id,
            to_model_id=to_model_id,
            actor=actor,
            reason=reason,
            at=now,
        )
        .returning(*ALIAS_HISTORY.c)
    )
    return _move_of(conn.execute(stmt).mappings().one())


def _alias(row: RowMapping) -> Alias:
    return Alias(
        name=row["name"],
        alias=row["alias"],
        model_id=row["model_id"],
        updated_at=row["updated_at"],
        updated_by=row["updated_by"],
    )


def _move_of(row: RowMapping) -> AliasMove:
    return AliasMove(
        seq=row["seq"],
        name=row["name"],
        alias=row["alias"],
        from_model_id=row["from_model_id"],
        to_model_id=row["to_model_id"],
        actor=row["actor"],
        reason=row["reason"],
        at=row["at"],
    )
