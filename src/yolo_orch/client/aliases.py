"""Model aliases from Python: `Client` and `AsyncClient` inherit these methods (`SyncAliases`,
`AsyncAliases`). `name@alias` names the model an alias points to now: a job naming it runs
that model when it starts, and a move of the alias switches running streams to the new one."""

from __future__ import annotations

from typing import Any, Protocol

from yolo_orch.api.model_schemas import AliasHistory, AliasList, AliasMoved, AliasPublic
from yolo_orch.client import wire
from yolo_orch.client.wire import Json

__all__ = ["AliasHistory", "AliasMoved", "AliasPublic", "AsyncAliases", "SyncAliases"]


def alias_path(name: str, alias: str, tail: str = "") -> str:
    return wire.model_path(name, f"/aliases/{wire.segment(alias)}{tail}")


def set_body(model: str, reason: str | None, expected_model_id: str | None) -> Json:
    body: Json = {"model": model}
    if reason is not None:
        body["reason"] = reason
    if expected_model_id is not None:
        body["expected_model_id"] = expected_model_id
    return body


def list_path(name: str | None) -> str:
    return "/v1/aliases" if name is None else wire.model_path(name, "/aliases")


def history_query(limit: int, cursor: int | None) -> dict[str, int]:
    return {"limit": limit} if cursor is None else {"limit": limit, "cursor": cursor}


class _SyncRequests(Protocol):
    def _json(self, method: str, path: str, **kwargs: Any) -> Json: ...

    def _request(self, method: str, path: str, **kwargs: Any) -> Any: ...


class SyncAliases:
    """`Client`'s alias methods."""

    def set_alias(
        self: _SyncRequests,
        name: str,
        alias: str,
        model: str,
        *,
        reason: str | None = None,
        expected_model_id: str | None = None,
    ) -> AliasMoved:
        """Point `name@alias` to `model` (an id, a name, or another `name@alias`); with
        `expected_model_id`, only if it still points there (else `alias_moved`). A rollback is
        a move back (`rollback_alias`)."""
        body = set_body(model, reason, expected_model_id)
        return AliasMoved.model_validate(self._json("PUT", alias_path(name, alias), json=body))

    def rollback_alias(
        self: _SyncRequests, name: str, alias: str, *, reason: str | None = None
    ) -> AliasMoved:
        """Move the alias back to where its last move took it from."""
        path = alias_path(name, alias, "/rollback")
        return AliasMoved.model_validate(self._json("POST", path, json={"reason": reason}))

    def alias(self: _SyncRequests, name: str, alias: str) -> AliasPublic:
        return AliasPublic.model_validate(self._json("GET", alias_path(name, alias)))

    def aliases(self: _SyncRequests, name: str | None = None) -> list[AliasPublic]:
        """Every alias, or those of the model name `name`."""
        return AliasList.model_validate(self._json("GET", list_path(name))).aliases

    def delete_alias(self: _SyncRequests, name: str, alias: str) -> None:
        self._request("DELETE", alias_path(name, alias))

    def alias_history(
        self: _SyncRequests, name: str, alias: str, *, limit: int = 50, cursor: int | None = None
    ) -> AliasHistory:
        """A page of its moves, newest first; `next_cursor` asks for the older ones."""
        path = alias_path(name, alias, "/history")
        answer = self._json("GET", path, params=history_query(limit, cursor))
        return AliasHistory.model_validate(answer)


class _AsyncRequests(Protocol):
    async def _json(self, method: str, path: str, **kwargs: Any) -> Json: ...

    async def _request(self, method: str, path: str, **kwargs: Any) -> Any: ...


class AsyncAliases:
    """`AsyncClient`'s alias methods: `SyncAliases`' twins."""

    async def set_alias(
        self: _AsyncRequests,
        name: str,
        alias: str,
        model: str,
        *,
        reason: str | None = None,
        expected_model_id: str | None = None,
    ) -> AliasMoved:
        body = set_body(model, reason, expected_model_id)
        answer = await self._json("PUT", alias_path(name, alias), json=body)
        return AliasMoved.model_validate(answer)

    async def rollback_alias(
        self: _AsyncRequests, name: str, alias: str, *, reason: str | None = None
    ) -> AliasMoved:
        path = alias_path(name, alias, "/rollback")
        return AliasMoved.model_validate(await self._json("POST", path, json={"reason": reason}))

    async def alias(self: _AsyncRequests, name: str, alias: str) -> AliasPublic:
        return AliasPublic.model_validate(await self._json("GET", alias_path(name, alias)))

    async def aliases(self: _AsyncRequests, name: str | None = None) -> list[AliasPublic]:
        return AliasList.model_validate(await self._json("GET", list_path(name))).aliases

    async def delete_alias(self: _AsyncRequests, name: str, alias: str) -> None:
        await self._request("DELETE", alias_path(name, alias))

    async def alias_history(
        self: _AsyncRequests, name: str, alias: str, *, limit: int = 50, cursor: int | None = None
    ) -> AliasHistory:
        path = alias_path(name, alias, "/history")
        answer = await self._json("GET", path, params=history_query(limit, cursor))
        return AliasHistory.model_validate(answer)
