"""The registry's latest answers about its models: which model a name or id is (for every
submission), and what it loads (for every run). Runners read them in worker threads without a
round trip through the event loop and the store's reader threads, which cost a warm 1-image
job's lane about a tenth of its time under load (py-spy, `bench.small_jobs`' load).

Kept on the event loop, read from any thread (a dict's get and a rebinding are atomic in
CPython). Every change to the registry's models or variants forgets them all. An answer read
before a change and kept after it would outlive it, so an answer is kept only if no change
came between the start of its read and its end.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from yolo_orch.domain.variants import Variant
from yolo_orch.registry.variant_imports import entry_of

if TYPE_CHECKING:
    from yolo_orch.domain import Model


class Resolutions:
    def __init__(self) -> None:
        self._models: dict[str, Model] = {}
        self._variants: dict[str, list[ResolvedVariant]] = {}
        self.generation = 0
        """Counts the changes: a read notes it before it starts and passes it to `keep_*`."""

    def model(self, ref: str) -> Model | None:
        return self._models.get(ref)

    def variants(self, model_id: str) -> list[ResolvedVariant] | None:
        found = self._variants.get(model_id)
        return None if found is None else list(found)

    def keep_model(self, ref: str, model: Model, generation: int) -> None:
        if generation == self.generation:
            self._models[ref] = model

    def keep_variants(
        self, model_id: str, resolved: list[ResolvedVariant], generation: int
    ) -> None:
        if generation == self.generation:
            self._variants[model_id] = list(resolved)

    def forget(self) -> None:
        """After a change to models or variants (and before its caller hears of it)."""
        self.generation += 1
        self._models = {}
        self._variants = {}


@dataclass(frozen=True)
class ResolvedVariant:
    """What a runner loads: the variant, its folder, and the file or folder ultralytics opens."""

    variant: Variant
    folder: Path

    @property
    def entry(self) -> Path:
        return entry_of(self.folder, self.variant.format)
