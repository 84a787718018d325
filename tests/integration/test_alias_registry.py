"""The alias registry over the model registry: a move's task check holds even when the alias
moves between the check and the write, and listeners hear of each committed move only."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from yolo_orch.domain import Model, NewModel
from yolo_orch.domain.aliases import ANY_TARGET, Alias, AliasMove, Expected
from yolo_orch.errors import AliasMoved, AliasTaskMismatch
from yolo_orch.ops.clock import utcnow
from yolo_orch.registry.models import ModelRegistry
from yolo_orch.registry.weights import CheckpointInfo
from yolo_orch.runners.variant_check import check_on_cpu
from yolo_orch.store.memory_aliases import InMemoryAliasStore
from yolo_orch.store.memory_models import InMemoryModelStore


class InterleavedAliases(InMemoryAliasStore):
    """Before the first move it is asked for, another move of the alias commits (as a second
    server's or request's would, between the registry's check and its write)."""

    def __init__(self, models: InMemoryModelStore, meanwhile: list[str]) -> None:
        super().__init__(models)
        self._meanwhile = meanwhile

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
        while self._meanwhile:
            other = self._meanwhile.pop(0)
            if other == "delete":
                await super().delete(name, alias, actor="someone", now=now)
            else:
                await super().move(name, alias, other, actor="someone", reason=None, now=now)
        return await super().move(
            name,
            alias,
            model_id,
            actor=actor,
            reason=reason,
            now=now,
            expected_model_id=expected_model_id,
        )


def inspect(path: Path) -> CheckpointInfo:
    raise AssertionError("these tests import nothing")


async def setup(
    tmp_path: Path, meanwhile: list[str]
) -> tuple[ModelRegistry, InterleavedAliases, dict[str, Model]]:
    store = InMemoryModelStore()
    models = {}
    for name, task in (("v1", "detect"), ("v2", "detect"), ("v3", "detect"), ("cls", "classify")):
        sha256 = name.ljust(64, "0")
        new = NewModel(name, sha256, 1, task, ("a",), "test", f"{sha256}.pt")
        models[name] = (await store.add(new, utcnow()))[0]
    meanwhile[:] = [models[m].id if m in models else m for m in meanwhile]
    aliases = InterleavedAliases(store, meanwhile)
    registry = ModelRegistry(
        store, tmp_path, [], inspect, check_variant=check_on_cpu(tmp_path), aliases=aliases
    )
    return registry, aliases, models


async def test_a_move_in_between_is_checked_again_and_then_followed(tmp_path: Path) -> None:
    meanwhile: list[str] = []
    registry, aliases, models = await setup(tmp_path, meanwhile)
    heard: list[str | None] = []
    registry.aliases.on_move(lambda move: heard.append(move.to_model_id))
    await registry.aliases.move("detector", "production", "v1", actor="a")
    meanwhile.append(models["v3"].id)

    moved, _ = await registry.aliases.move("detector", "production", "v2", actor="b")

    assert moved.model_id == models["v2"].id
    history = await aliases.history("detector", "production", limit=10)
    assert [m.to_model_id for m in history] == [models[m].id for m in ("v2", "v3", "v1")]
    assert heard == [models["v1"].id, models["v2"].id]  # the registry's own moves


async def test_an_alias_that_changed_task_in_between_refuses_the_move(tmp_path: Path) -> None:
    meanwhile: list[str] = []
    registry, _, models = await setup(tmp_path, meanwhile)
    await registry.aliases.move("detector", "production", "v1", actor="a")
    meanwhile.extend(["delete", models["cls"].id])  # remade, for another task

    with pytest.raises(AliasTaskMismatch):
        await registry.aliases.move("detector", "production", "v2", actor="b")

    assert (await registry.get("detector@production")).id == models["cls"].id


async def test_a_callers_own_expectation_is_not_retried(tmp_path: Path) -> None:
    meanwhile: list[str] = []
    registry, _, models = await setup(tmp_path, meanwhile)
    await registry.aliases.move("detector", "production", "v1", actor="a")
    meanwhile.append(models["v3"].id)

    with pytest.raises(AliasMoved):
        await registry.aliases.move(
            "detector", "production", "v2", actor="chain:x", expected_model_id=models["v1"].id
        )

    assert (await registry.get("detector@production")).id == models["v3"].id
