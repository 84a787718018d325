"""The durable weights registry, on the `Database` the job store uses (see `database.py`):
its writes are ops in the same write queue as the jobs'."""

from __future__ import annotations

import functools
from datetime import datetime

from sqlalchemy import RowMapping, delete, insert, literal_column, select, update
from sqlalchemy.engine import Connection

from yolo_orch.domain import Model, NewModel
from yolo_orch.domain.variants import NewVariant, Variant
from yolo_orch.errors import (
    ModelHasAliases,
    ModelHasVariants,
    ModelInUse,
    ModelNameTaken,
    ModelNotFound,
    VariantNotFound,
)
from yolo_orch.store.alias_tables import ALIASES
from yolo_orch.store.base import ModelStore
from yolo_orch.store.database import Database
from yolo_orch.store.job_rows import ACTIVE
from yolo_orch.store.tables import (
    JOBS,
    MODELS,
    VARIANTS,
    model_from_row,
    new_model_values,
    new_variant_values,
    variant_from_row,
)


class SqlModelStore(ModelStore):
    def __init__(self, db: Database) -> None:
        self._db = db

    async def add(self, new: NewModel, now: datetime) -> tuple[Model, bool]:
        # Lookups and insert share one write transaction: concurrent imports of the same
        # weights make one model, and the unique indexes are never what refuses one.
        return await self._db.write(functools.partial(_add, new, now))

    async def get(self, ref: str) -> Model:
        row = await self._db.read(functools.partial(_find, ref))
        return model_from_row(row)

    async def list_models(self) -> list[Model]:
        # rowid breaks ties in time: SQLite gives each new row one above the largest rowid (and
        # the migrations give PostgreSQL's tables such a column).
        stmt = select(MODELS).order_by(
            MODELS.c.created_at.desc(), literal_column("models.rowid").desc()
        )
        rows = await self._db.read(lambda conn: conn.execute(stmt).mappings().all())
        return [model_from_row(row) for row in rows]

    async def delete(self, ref: str, *, cascade: bool = False) -> Model:
        # Check and delete share the write queue with `SqlJobStore.create`, so no job can be
        # queued for the model between them.
        return await self._db.write(functools.partial(_delete, ref, cascade))

    async def mark_unusable(self, model_id: str) -> None:
        await self._db.write(functools.partial(_mark_unusable, model_id))

    async def add_variant(self, new: NewVariant, now: datetime) -> tuple[Variant, bool]:
        return await self._db.write(functools.partial(_add_variant, new, now))

    async def list_variants(self, model_id: str) -> list[Variant]:
        stmt = (
            select(VARIANTS)
            .where(VARIANTS.c.model_id == model_id)
            .order_by(VARIANTS.c.created_at.desc(), literal_column("model_variants.rowid").desc())
        )
        rows = await self._db.read(lambda conn: conn.execute(stmt).mappings().all())
        return [variant_from_row(row) for row in rows]

    async def get_variant(self, variant_id: str) -> Variant:
        return variant_from_row(await self._db.read(functools.partial(_find_variant, variant_id)))

    async def delete_variant(self, variant_id: str) -> Variant:
        return await self._db.write(functools.partial(_delete_variant, variant_id))

    async def mark_variant_unusable(self, variant_id: str, reason: str) -> None:
        stmt = (
            update(VARIANTS)
            .where(VARIANTS.c.id == variant_id)
            .values(usable=False, unusable_reason=reason)
        )

        def op(conn: Connection) -> None:
            if conn.execute(stmt.returning(VARIANTS.c.id)).first() is None:
                raise VariantNotFound(variant_id)

        await self._db.write(op)


# The ops (see `Database.read` and `.write`).


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


def _delete(ref: str, cascade: bool, conn: Connection) -> Model:
    row = _find(ref, conn)
    users = (
        conn.execute(
            select(JOBS.c.id).where(JOBS.c.model_id == row["id"], ACTIVE).order_by(JOBS.c.seq)
        )
        .scalars()
        .all()
    )
    if users:
        raise ModelInUse(ref, list(users))
    # Checked here, in the delete's transaction; the foreign key (RESTRICT) would refuse it too.
    aliases = conn.execute(
        select(ALIASES.c.name, ALIASES.c.alias)
        .where(ALIASES.c.model_id == row["id"])
        .order_by(ALIASES.c.name, ALIASES.c.alias)
    ).all()
    if aliases:
        raise ModelHasAliases(ref, [f"{name}@{alias}" for name, alias in aliases])
    variants = conn.execute(
        select(VARIANTS.c.id).where(VARIANTS.c.model_id == row["id"]).order_by(VARIANTS.c.id)
    ).scalars()
    if variant_ids := list(variants):
        if not cascade:
            raise ModelHasVariants(ref, variant_ids)
        conn.execute(delete(VARIANTS).where(VARIANTS.c.model_id == row["id"]))
    # The foreign key (ON DELETE SET NULL) clears `model_id` of finished jobs.
    conn.execute(delete(MODELS).where(MODELS.c.id == row["id"]))
    return model_from_row(row)


def _mark_unusable(model_id: str, conn: Connection) -> None:
    stmt = update(MODELS).where(MODELS.c.id == model_id).values(usable=False)
    if conn.execute(stmt.returning(MODELS.c.id)).first() is None:
        raise ModelNotFound(model_id)


def _add_variant(new: NewVariant, now: datetime, conn: Connection) -> tuple[Variant, bool]:
    if conn.execute(select(MODELS.c.id).where(MODELS.c.id == new.model_id)).first() is None:
        raise ModelNotFound(new.model_id)
    same = VARIANTS.c.sha256 == new.sha256
    if new.job_id is not None:
        same = same | ((VARIANTS.c.job_id == new.job_id) & (VARIANTS.c.format == str(new.format)))
    stmt = select(VARIANTS).where(VARIANTS.c.model_id == new.model_id, same)
    existing = conn.execute(stmt).mappings().first()
    if existing is not None:
        return variant_from_row(existing), False
    inserted = insert(VARIANTS).values(new_variant_values(new, now)).returning(*VARIANTS.c)
    return variant_from_row(conn.execute(inserted).mappings().one()), True


def _find_variant(variant_id: str, conn: Connection) -> RowMapping:
    row = conn.execute(select(VARIANTS).where(VARIANTS.c.id == variant_id)).mappings().first()
    if row is None:
        raise VariantNotFound(variant_id)
    return row


def _delete_variant(variant_id: str, conn: Connection) -> Variant:
    row = _find_variant(variant_id, conn)
    conn.execute(delete(VARIANTS).where(VARIANTS.c.id == variant_id))
    return variant_from_row(row)
