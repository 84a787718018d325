"""The alias store in memory, beside the in-memory job and model stores (`memory.py`): for fast
tests and demos. As there, no method suspends between its reads and its writes (the in-memory
model store's `get` never does), so each runs whole on the event loop. The model store in memory
knows nothing of aliases: the registry refuses to delete a model an alias points to
(`AliasStore.pointing_to`), as the SQL model store does in the delete's transaction."""

from __future__ import annotations

from datetime import datetime

from yolo_orch.domain.aliases import ANY_TARGET, Alias, AliasMove, Expected
from yolo_orch.errors import AliasMoved, AliasNotFound
from yolo_orch.store.aliases import AliasStore
from yolo_orch.store.base import ModelStore


class InMemoryAliasStore(AliasStore):
    def __init__(self, models: ModelStore) -> None:
        """`models`: an in-memory model store (`InMemoryModelStore`), whose models the aliases
        point to."""
        self._models = models
        self._aliases: dict[tuple[str, str], Alias] = {}
        self._history: list[AliasMove] = []
        """Every move, oldest first."""

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
        found = self._aliases.get((name, alias))
        current = None if found is None else found.model_id
        if expected_model_id is not ANY_TARGET and expected_model_id != current:
            raise AliasMoved(name, alias, expected_model_id, current)
        await self._models.get(model_id)  # raises ModelNotFound
        moved = Alias(name, alias, model_id, updated_at=now, updated_by=actor)
        self._aliases[(name, alias)] = moved
        return moved, self._record(name, alias, current, model_id, actor, reason, now)

    async def get(self, name: str, alias: str) -> Alias:
        try:
            return self._aliases[(name, alias)]
        except KeyError:
            raise AliasNotFound(name, alias) from None

    async def list_aliases(self, name: str | None = None) -> list[Alias]:
        return [
            found for key, found in sorted(self._aliases.items()) if name is None or key[0] == name
        ]

    async def pointing_to(self, model_id: str) -> list[Alias]:
        return [found for _, found in sorted(self._aliases.items()) if found.model_id == model_id]

    async def delete(self, name: str, alias: str, *, actor: str, now: datetime) -> AliasMove:
        gone = await self.get(name, alias)
        del self._aliases[(name, alias)]
        return self._record(name, alias, gone.model_id, None, actor, None, now)

    async def history(
        self, name: str, alias: str, *, limit: int, before_seq: int | None = None
    ) -> list[AliasMove]:
        newest_first = (
            move
            for move in reversed(self._history)
            if (move.name, move.alias) == (name, alias)
            and (before_seq is None or move.seq < before_seq)
        )
        return [move for _, move in zip(range(limit), newest_first, strict=False)]

    def _record(
        self,
        name: str,
        alias: str,
        from_model_id: str | None,
        to_model_id: str | None,
        actor: str,
        reason: str | None,
        now: datetime,
    ) -> AliasMove:
        seq = self._history[-1].seq + 1 if self._history else 1
        move = AliasMove(seq, name, alias, from_model_id, to_model_id, actor, reason, now)
        self._history.append(move)
        return move
