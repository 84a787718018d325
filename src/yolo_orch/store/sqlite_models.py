"""The durable weights registry, on the `SQLiteDatabase` the job store uses (see `sqlite.py`)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, literal_column, update
from sqlmodel import col, select
from sqlmodel.ext.asyncio.session import AsyncSession

from yolo_orch.domain import JobState, Model, NewModel
from yolo_orch.errors import ModelInUse, ModelNameTaken, ModelNotFound
from yolo_orch.store.base import ModelStore
from yolo_orch.store.sqlite import SQLiteDatabase, shielded
from yolo_orch.store.tables import JobRow, ModelRow

_ACTIVE = (JobState.QUEUED, JobState.RUNNING)


class SQLiteModelStore(ModelStore):
    def __init__(self, db: SQLiteDatabase) -> None:
        self._db = db

    @shielded
    async def add(self, new: NewModel, now: datetime) -> tuple[Model, bool]:
        # Lookups and insert share one write transaction: concurrent imports of the same
        # weights make one model, and the unique indexes are never what refuses one.
        async with self._db.writing() as session:
            same = (
                await session.exec(select(ModelRow).where(col(ModelRow.sha256) == new.sha256))
            ).first()
            if same is not None:
                return same.to_model(), False
            named = await session.exec(select(ModelRow.id).where(col(ModelRow.name) == new.name))
            if named.first() is not None:
                raise ModelNameTaken(new.name)
            row = ModelRow.from_new(new, now)
            session.add(row)
            await session.flush()
            return row.to_model(), True

    @shielded
    async def get(self, ref: str) -> Model:
        async with self._db.reading() as session:
            return (await _find(session, ref)).to_model()

    @shielded
    async def list_models(self) -> list[Model]:
        # rowid breaks ties in time: SQLite gives each new row one above the largest rowid.
        stmt = select(ModelRow).order_by(
            col(ModelRow.created_at).desc(), literal_column("models.rowid").desc()
        )
        async with self._db.reading() as session:
            return [row.to_model() for row in (await session.exec(stmt)).all()]

    @shielded
    async def delete(self, ref: str) -> Model:
        # Check and delete share the write lock with `SQLiteJobStore.create`, so no job can be
        # queued for the model between them.
        async with self._db.writing() as session:
            row = await _find(session, ref)
            users = (
                await session.exec(
                    select(JobRow.id)
                    .where(col(JobRow.model_id) == row.id, col(JobRow.state).in_(_ACTIVE))
                    .order_by(col(JobRow.seq))
                )
            ).all()
            if users:
                raise ModelInUse(ref, list(users))
            # The foreign key (ON DELETE SET NULL) clears `model_id` of finished jobs.
            await session.exec(delete(ModelRow).where(col(ModelRow.id) == row.id))
            return row.to_model()

    @shielded
    async def mark_unusable(self, model_id: str) -> None:
        stmt = (
            update(ModelRow)
            .where(col(ModelRow.id) == model_id)
            .values(usable=False)
            .returning(col(ModelRow.id))
        )
        async with self._db.writing() as session:
            if (await session.exec(stmt)).first() is None:
                raise ModelNotFound(model_id)


async def _find(session: AsyncSession, ref: str) -> ModelRow:
    """By id first: an id is what a job or an earlier answer holds."""
    for column in (ModelRow.id, ModelRow.name):
        row = (await session.exec(select(ModelRow).where(col(column) == ref))).first()
        if row is not None:
            return row
    raise ModelNotFound(ref)
