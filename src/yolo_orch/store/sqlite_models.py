"""The durable weights registry, on the `SQLiteDatabase` the job store uses (see `sqlite.py`):
its writes are ops in the same write queue as the jobs'."""

from __future__ import annotations

import functools
from datetime import datetime

from sqlalchemy import RowMapping, delete, insert, literal_column, select, update
from sqlalchemy.engine import Connection

from yolo_orch.domain import JobState, Model, NewModel
from yolo_orch.errors import ModelInUse, ModelNameTaken, ModelNotFound
from yolo_orch.store.base import ModelStore
from yolo_orch.store.sqlite import SQLiteDatabase
from yolo_orch.store.tables import JOBS, MODELS, model_from_row, new_model_values

_ACTIVE = [str(JobState.QUEUED), str(JobState.RUNNING)]


class SQLiteModelStore(ModelStore):
    def __init__(self, db: SQLiteDatabase) -> None:
        self._db = db

    async def add(self, new: NewModel, now: datetime) -> tuple[Model, bool]:
        # Lookups and insert share one write transaction: concurrent imports of the same
        # weights make one model, and the unique indexes are never what refuses one.
        return await self._db.write(functools.partial(_add, new, now))

    async def get(self, ref: str) -> Model:
        row = await self._db.read(functools.partial(_find, ref))
        return model_from_row(row)

    async def list_models(self) -> list[Model]:
        # rowid breaks ties in time: SQLite gives each new row one above the largest rowid.
        stmt = select(MODELS).order_by(
            MODELS.c.created_at.desc(), literal_column("models.rowid").desc()
        )
        rows = await self._db.read(lambda conn: conn.execute(stmt).mappings().all())
        return [model_from_row(row) for row in rows]

    async def delete(self, ref: str) -> Model:
        # Check and delete share the write queue with `SQLiteJobStore.create`, so no job can be
        # queued for the model between them.
        return await self._db.write(functools.partial(_delete, ref))

    async def mark_unusable(self, model_id: str) -> None:
        await self._db.write(functools.partial(_mark_unusable, model_id))


# The ops (see `SQLiteDatabase.read` and `.write`).


def _find(ref: str, conn: Connection) -> RowMapping:
    """By id first: an id is what a job or an earlier answer holds."""
    for column in (MODELS.c.id, MODELS.c.name):
        row = conn.execute(select(MODELS).where(column == ref)).mappings().first()
        if row is not None:
            return row
    raise ModelNotFound(ref)


def _add(new: NewModel, now: datetime, conn: Connection) -> tuple[Model, bool]:
    same = conn.execute(select(MODELS).where(MODELS.c.sha256 == new.sha256)).mappings().first()
    if same is not None:
        return model_from_row(same), False
    if conn.execute(select(MODELS.c.id).where(MODELS.c.name == new.name)).first() is not None:
        raise ModelNameTaken(new.name)
    stmt = insert(MODELS).values(new_model_values(new, now)).returning(*MODELS.c)
    return model_from_row(conn.execute(stmt).mappings().one()), True


def _delete(ref: str, conn: Connection) -> Model:
    row = _find(ref, conn)
    users = (
        conn.execute(
            select(JOBS.c.id)
            .where(JOBS.c.model_id == row["id"], JOBS.c.state.in_(_ACTIVE))
            .order_by(JOBS.c.seq)
        )
        .scalars()
        .all()
    )
    if users:
        raise ModelInUse(ref, list(users))
    # The foreign key (ON DELETE SET NULL) clears `model_id` of finished jobs.
    conn.execute(delete(MODELS).where(MODELS.c.id == row["id"]))
    return model_from_row(row)


def _mark_unusable(model_id: str, conn: Connection) -> None:
    stmt = update(MODELS).where(MODELS.c.id == model_id).values(usable=False)
    if conn.execute(stmt.returning(MODELS.c.id)).first() is None:
        raise ModelNotFound(model_id)
