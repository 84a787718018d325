"""The alias store interface: where each `name@alias` points, and every move, kept."""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime

from yolo_orch.domain.aliases import ANY_TARGET, Alias, AliasMove, Expected


class AliasStore(ABC):
    """Each change is one committed write: the alias's row and its history entry together.
    Shares its database with the model store, whose models the aliases point to."""

    @abstractmethod
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
        """Point `name@alias` to `model_id` (making the alias if it is new) and record the
        move. Raise `ModelNotFound` for an unknown model, and `AliasMoved` when the alias does
        not point where `expected_model_id` says (None: it must not exist yet), moving
        nothing. A move to where it points already is recorded too (who confirmed it)."""

    @abstractmethod
    async def get(self, name: str, alias: str) -> Alias:
        """Raise `AliasNotFound` if there is no such alias."""

    @abstractmethod
    async def list_aliases(self, name: str | None = None) -> list[Alias]:
        """Every alias (of the model name `name` only, if given), by name then alias."""

    @abstractmethod
    async def pointing_to(self, model_id: str) -> list[Alias]:
        """The aliases that point to `model_id`, by name then alias."""

    @abstractmethod
    async def delete(self, name: str, alias: str, *, actor: str, now: datetime) -> AliasMove:
        """Forget the alias and record it; raise `AliasNotFound` if there is no such alias."""

    @abstractmethod
    async def history(
        self, name: str, alias: str, *, limit: int, before_seq: int | None = None
    ) -> list[AliasMove]:
        """The alias's moves, newest first: at most `limit`, older than `before_seq` if given.
        Kept after the alias is deleted (a later alias of that name continues it)."""
