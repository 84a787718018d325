"""One contract for every `AliasStore`, with the model store on the same database: an alias points
only to a model that exists, each move is recorded with it, and a model an alias points to stays."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from tests.support.postgres import ENGINES, migrated_url
from tests.support.stores import T0, open_database
from yolo_orch.domain import Model, NewModel
from yolo_orch.errors import AliasMoved, AliasNotFound, ModelHasAliases, ModelNotFound
from yolo_orch.store.aliases import AliasStore
from yolo_orch.store.base import ModelStore
from yolo_orch.store.memory_aliases import InMemoryAliasStore
from yolo_orch.store.memory_models import InMemoryModelStore
from yolo_orch.store.sql_aliases import SqlAliasStore
from yolo_orch.store.sql_models import SqlModelStore


@dataclass(frozen=True)
class Stores:
    aliases: AliasStore
    models: ModelStore
    durable: bool


@pytest.fixture(params=ENGINES)
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    if request.param == "memory":
        models = InMemoryModelStore()
        yield Stores(InMemoryAliasStore(models), models, durable=False)
        return
    url = await migrated_url(request.param, request, tmp_path)
    async with open_database(url) as db:
        yield Stores(SqlAliasStore(db), SqlModelStore(db), durable=True)


def new_model(name: str, sha256: str) -> NewModel:
    return NewModel(name, sha256, 1, "detect", ("person",), "upload", f"{sha256}.pt")


async def two_models(stores: Stores) -> tuple[Model, Model]:
    first, _ = await stores.models.add(new_model("detector-v1", "a" * 64), T0)
    second, _ = await stores.models.add(new_model("detector-v2", "b" * 64), T0)
    return first, second


async def test_a_move_makes_the_alias_and_records_it(stores: Stores) -> None:
    v1, _ = await two_models(stores)

    alias, move = await stores.aliases.move(
        "detector", "production", v1.id, actor="ops", reason="first", now=T0
    )

    assert (alias.model_id, alias.updated_by, alias.updated_at) == (v1.id, "ops", T0)
    assert await stores.aliases.get("detector", "production") == alias
    assert (move.from_model_id, move.to_model_id, move.reason) == (None, v1.id, "first")
    assert await stores.aliases.history("detector", "production", limit=10) == [move]


async def test_moves_are_kept_newest_first_and_paged(stores: Stores) -> None:
    v1, v2 = await two_models(stores)
    for step, model in enumerate([v1, v2, v1, v2]):
        await stores.aliases.move(
            "detector",
            "production",
            model.id,
            actor=f"a{step}",
            reason=None,
            now=T0 + timedelta(seconds=step),
        )
    await stores.aliases.move("detector", "staging", v2.id, actor="x", reason=None, now=T0)

    first_page = await stores.aliases.history("detector", "production", limit=3)
    rest = await stores.aliases.history(
        "detector", "production", limit=3, before_seq=first_page[-1].seq
    )

    assert [move.actor for move in first_page + rest] == ["a3", "a2", "a1", "a0"]
    assert [(m.from_model_id, m.to_model_id) for m in rest] == [(None, v1.id)]
    assert (first_page[0].from_model_id, first_page[0].to_model_id) == (v1.id, v2.id)


async def test_a_compare_and_set_moves_only_from_where_it_expected(stores: Stores) -> None:
    v1, v2 = await two_models(stores)
    await stores.aliases.move("detector", "production", v1.id, actor="a", reason=None, now=T0)

    with pytest.raises(AliasMoved) as moved:
        await stores.aliases.move(
            "detector",
            "production",
            v2.id,
            actor="chain",
            reason=None,
            now=T0,
            expected_model_id=v2.id,
        )
    assert moved.value.current == v1.id
    with pytest.raises(AliasMoved):  # None: it must not exist yet
        await stores.aliases.move(
            "detector",
            "production",
            v2.id,
            actor="b",
            reason=None,
            now=T0,
            expected_model_id=None,
        )
    assert (await stores.aliases.get("detector", "production")).model_id == v1.id
    assert len(await stores.aliases.history("detector", "production", limit=10)) == 1

    alias, _ = await stores.aliases.move(
        "detector",
        "production",
        v2.id,
        actor="chain",
        reason=None,
        now=T0,
        expected_model_id=v1.id,
    )
    assert alias.model_id == v2.id


async def test_an_alias_points_only_to_a_model_that_exists(stores: Stores) -> None:
    with pytest.raises(ModelNotFound):
        await stores.aliases.move("detector", "production", "nope", actor="a", reason=None, now=T0)

    with pytest.raises(AliasNotFound):
        await stores.aliases.get("detector", "production")
    assert await stores.aliases.history("detector", "production", limit=10) == []


async def test_a_delete_forgets_the_alias_and_keeps_its_history(stores: Stores) -> None:
    v1, _ = await two_models(stores)
    await stores.aliases.move("detector", "production", v1.id, actor="a", reason=None, now=T0)

    move = await stores.aliases.delete("detector", "production", actor="b", now=T0)

    assert (move.from_model_id, move.to_model_id, move.actor) == (v1.id, None, "b")
    with pytest.raises(AliasNotFound):
        await stores.aliases.get("detector", "production")
    with pytest.raises(AliasNotFound):
        await stores.aliases.delete("detector", "production", actor="b", now=T0)
    history = await stores.aliases.history("detector", "production", limit=10)
    assert [m.to_model_id for m in history] == [None, v1.id]


async def test_lists_by_name_and_by_target(stores: Stores) -> None:
    v1, v2 = await two_models(stores)
    await stores.aliases.move("detector", "staging", v2.id, actor="a", reason=None, now=T0)
    await stores.aliases.move("detector", "production", v1.id, actor="a", reason=None, now=T0)
    await stores.aliases.move("counter", "production", v1.id, actor="a", reason=None, now=T0)

    every = await stores.aliases.list_aliases()
    named = await stores.aliases.list_aliases("detector")
    on_v1 = await stores.aliases.pointing_to(v1.id)

    assert [str(a.ref) for a in every] == [
        "counter@production",
        "detector@production",
        "detector@staging",
    ]
    assert [a.alias for a in named] == ["production", "staging"]
    assert [str(a.ref) for a in on_v1] == ["counter@production", "detector@production"]


async def test_the_durable_store_refuses_deleting_a_model_an_alias_points_to(
    stores: Stores,
) -> None:
    if not stores.durable:
        pytest.skip("the in-memory model store leaves this check to the registry")
    v1, _ = await two_models(stores)
    await stores.aliases.move("detector", "production", v1.id, actor="a", reason=None, now=T0)

    with pytest.raises(ModelHasAliases) as refused:
        await stores.models.delete(v1.id)

    assert refused.value.aliases == ["detector@production"]
    assert (await stores.models.get(v1.id)).id == v1.id
