"""Model aliases over the weights registry: `name@alias` names the model the alias points to now.
A move checks the model it points to (usable; of the task the alias had, so that jobs checked at
submission against the old model still run), commits the alias with its history entry, forgets
the registry's kept answers (which held the old target), and then tells the listeners (running
streams switch model)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime

from yolo_orch.domain import Model
from yolo_orch.domain.aliases import ANY_TARGET, Alias, AliasMove, Expected
from yolo_orch.errors import (
    AliasHasNoPrevious,
    AliasMoved,
    AliasNotFound,
    AliasTaskMismatch,
    ModelUnusable,
)
from yolo_orch.ops.clock import utcnow
from yolo_orch.registry.resolutions import Resolutions
from yolo_orch.store.aliases import AliasStore
from yolo_orch.store.base import ModelStore

log = logging.getLogger(__name__)

_TASK_CHECKS = 3
"""Tries of a move whose alias another move keeps moving between its check and its write."""

OnMove = Callable[[AliasMove], None]
"""Called on the event loop after a move or a delete has committed; must not block."""


class AliasRegistry:
    def __init__(
        self,
        store: AliasStore,
        models: ModelStore,
        resolutions: Resolutions,
        lookup: Callable[[str], Awaitable[Model]],
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        """`lookup`: the model a reference names (`ModelRegistry.get`: a name, an id, or
        another alias's `name@alias`)."""
        self._store = store
        self._models = models
        self._resolutions = resolutions
        self._lookup = lookup
        self._now = now
        self._listeners: list[OnMove] = []

    def on_move(self, listener: OnMove) -> None:
        self._listeners.append(listener)

    async def move(
        self,
        name: str,
        alias: str,
        model_ref: str,
        *,
        actor: str,
        reason: str | None = None,
        expected_model_id: Expected = ANY_TARGET,
    ) -> tuple[Alias, AliasMove]:
        """Point `name@alias` to the model `model_ref` names. `expected_model_id`: a
        compare-and-set (see `AliasStore.move`); a chain's promotion passes the model it
        validated the alias's target as."""
        model = await self._lookup(model_ref)
        if not model.usable:
            raise ModelUnusable(model_ref)
        attempts = 0
        while True:
            attempts += 1
            current = await self._current_model(name, alias)
            if current is not None and current.task != model.task:
                raise AliasTaskMismatch(name, alias, current.task, model.task)
            # The task was checked against `current`: the move holds only if the alias still
            # points there (a move in between is checked again; the caller's own expectation,
            # if it has one, is never retried).
            checked = expected_model_id
            if checked is ANY_TARGET:
                checked = None if current is None else current.id
            try:
                moved, move = await self._store.move(
                    name,
                    alias,
                    model.id,
                    actor=actor,
                    reason=reason,
                    now=self._now(),
                    expected_model_id=checked,
                )
            except AliasMoved:
                if expected_model_id is not ANY_TARGET or attempts == _TASK_CHECKS:
                    raise
                continue
            self._moved(move)
            return moved, move

    async def rollback(
        self, name: str, alias: str, *, actor: str, reason: str | None = None
    ) -> tuple[Alias, AliasMove]:
        """Move the alias back to where its last move took it from, if it still points where
        that move took it."""
        found = await self._store.get(name, alias)
        last = await self._store.history(name, alias, limit=1)
        if not last or last[0].to_model_id != found.model_id or last[0].from_model_id is None:
            raise AliasHasNoPrevious(name, alias)
        return await self.move(
            name,
            alias,
            last[0].from_model_id,
            actor=actor,
            reason=reason,
            expected_model_id=found.model_id,
        )

    async def delete(self, name: str, alias: str, *, actor: str) -> AliasMove:
        move = await self._store.delete(name, alias, actor=actor, now=self._now())
        self._moved(move)
        return move

    async def get(self, name: str, alias: str) -> Alias:
        return await self._store.get(name, alias)

    async def current(self, name: str, alias: str) -> Model:
        """The model `name@alias` points to now; `AliasNotFound` if there is no such alias."""
        found = await self._store.get(name, alias)
        return await self._models.get(found.model_id)

    async def list_aliases(self, name: str | None = None) -> list[Alias]:
        return await self._store.list_aliases(name)

    async def pointing_to(self, model_id: str) -> list[Alias]:
        return await self._store.pointing_to(model_id)

    async def history(
        self, name: str, alias: str, *, limit: int, before_seq: int | None = None
    ) -> list[AliasMove]:
        return await self._store.history(name, alias, limit=limit, before_seq=before_seq)

    async def _current_model(self, name: str, alias: str) -> Model | None:
        try:
            found = await self._store.get(name, alias)
        except AliasNotFound:
            return None
        return await self._models.get(found.model_id)

    def _moved(self, move: AliasMove) -> None:
        self._resolutions.forget()  # kept answers for `name@alias` held the old target
        for listener in self._listeners:
            try:
                listener(move)
            except Exception:  # one listener's bug must not hide the move from the others
                log.exception("a listener of %s@%s's moves failed", move.name, move.alias)
