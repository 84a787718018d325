"""The model store in memory, over the `InMemoryDatabase` it shares with the job store
(`memory.py`): as the SQL model store behaves, which the shared contract tests check."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import datetime

from yolo_orch.domain import Model, NewModel
from yolo_orch.domain.variants import NewVariant, Variant
from yolo_orch.errors import (
    ModelHasVariants,
    ModelInUse,
    ModelNameTaken,
    ModelNotFound,
    VariantNotFound,
)
from yolo_orch.store.base import ModelStore
from yolo_orch.store.memory import InMemoryDatabase


class InMemoryModelStore(ModelStore):
    def __init__(self, db: InMemoryDatabase | None = None) -> None:
        self._db = db if db is not None else InMemoryDatabase()
        self._models = self._db.models
        self._variants = self._db.variants

    # Inspection helpers for tests.
    @property
    def models(self) -> list[Model]:
        """In registration order."""
        return list(self._models.values())

    async def add(self, new: NewModel, now: datetime) -> tuple[Model, bool]:
        for model in self._models.values():
            if model.sha256 == new.sha256:
                return model, False
        if any(model.name == new.name for model in self._models.values()):
            raise ModelNameTaken(new.name)
        model = Model(
            id=str(uuid.uuid4()),
            name=new.name,
            sha256=new.sha256,
            size_bytes=new.size_bytes,
            task=new.task,
            class_names=new.class_names,
            source=new.source,
            file_name=new.file_name,
            created_at=now,
        )
        self._models[model.id] = model
        return model, True

    async def get(self, ref: str) -> Model:
        return self._find(ref)

    async def list_models(self) -> list[Model]:
        # Stable sort: models registered at one instant stay newest first too.
        newest_first = list(reversed(self._models.values()))
        return sorted(newest_first, key=lambda model: model.created_at, reverse=True)

    async def delete(self, ref: str, *, cascade: bool = False) -> Model:
        model = self._find(ref)
        if users := self._db.active_job_ids(model.id):
            raise ModelInUse(ref, users)
        if variant_ids := sorted(v.id for v in self._variants.values() if v.model_id == model.id):
            if not cascade:
                raise ModelHasVariants(ref, variant_ids)
            for variant_id in variant_ids:
                del self._variants[variant_id]
        del self._models[model.id]
        # As the SQLite foreign key does (ON DELETE SET NULL).
        for job in list(self._db.jobs.values()):
            if job.model_id == model.id:
                self._db.jobs[job.id] = replace(job, model_id=None)
        return model

    async def mark_unusable(self, model_id: str) -> None:
        try:
            model = self._models[model_id]
        except KeyError:
            raise ModelNotFound(model_id) from None
        self._models[model_id] = replace(model, usable=False)

    def _find(self, ref: str) -> Model:
        """By id first: an id is what a job or an earlier answer holds."""
        if ref in self._models:
            return self._models[ref]
        for model in self._models.values():
            if model.name == ref:
                return model
        raise ModelNotFound(ref)

    async def add_variant(self, new: NewVariant, now: datetime) -> tuple[Variant, bool]:
        if new.model_id not in self._models:
            raise ModelNotFound(new.model_id)
        for variant in self._variants.values():
            if variant.model_id == new.model_id and (
                variant.sha256 == new.sha256
                or (
                    new.job_id is not None
                    and (variant.job_id, variant.format) == (new.job_id, new.format)
                )
            ):
                return variant, False
        variant = Variant(
            id=new.id,
            model_id=new.model_id,
            format=new.format,
            sha256=new.sha256,
            size_bytes=new.size_bytes,
            files=dict(new.files),
            lineage=new.lineage,
            source=new.source,
            job_id=new.job_id,
            created_at=now,
        )
        self._variants[variant.id] = variant
        return variant, True

    async def list_variants(self, model_id: str) -> list[Variant]:
        newest_first = [v for v in reversed(self._variants.values()) if v.model_id == model_id]
        return sorted(newest_first, key=lambda variant: variant.created_at, reverse=True)

    async def get_variant(self, variant_id: str) -> Variant:
        try:
            return self._variants[variant_id]
        except KeyError:
            raise VariantNotFound(variant_id) from None

    async def delete_variant(self, variant_id: str) -> Variant:
        variant = await self.get_variant(variant_id)
        del self._variants[variant_id]
        return variant

    async def mark_variant_unusable(self, variant_id: str, reason: str) -> None:
        variant = await self.get_variant(variant_id)
        self._variants[variant_id] = replace(variant, usable=False, unusable_reason=reason)
