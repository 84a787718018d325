"""/v1/models/{name}/aliases and /v1/aliases: where each `name@alias` points, moving it (one
transaction with its history entry), and the history. A job naming `name@alias` runs the model
the alias points to when the job starts; a rollback is a move back (`POST .../rollback` moves
it to where its last move took it from)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response, status

from yolo_orch.api.auth import Actor, models_write_scope
from yolo_orch.api.deps import ServicesDep
from yolo_orch.api.model_schemas import (
    AliasHistory,
    AliasList,
    AliasMoved,
    AliasMovePublic,
    AliasPublic,
    AliasRollback,
    AliasSet,
)
from yolo_orch.api.problems import problem_responses
from yolo_orch.domain import MODEL_NAME_MAX_LENGTH, MODEL_NAME_PATTERN
from yolo_orch.domain.aliases import ALIAS_PATTERN, ANY_TARGET, Alias, AliasMove

router = APIRouter(tags=["aliases"])

AliasName = Annotated[
    str,
    Path(
        description="The model name the alias belongs to (the part before `@`); it need not be "
        "a registered model's name.",
        max_length=MODEL_NAME_MAX_LENGTH,
        pattern=MODEL_NAME_PATTERN,
    ),
]
AliasLabel = Annotated[
    str, Path(description="The alias (after `@`), e.g. `production`.", pattern=ALIAS_PATTERN)
]
_PATH = "/v1/models/{name}/aliases/{alias}"
_MOVED = (
    "The alias and this move. Jobs that name `name@alias` and start from now on run the model; "
    "running streams that name it switch to it between two frames."
)


@router.put(
    _PATH,
    response_model=AliasMoved,
    summary="Point an alias to a model",
    description="Makes the alias, or moves it, and records the move (who: the token's name; "
    "when; from; to; `reason`) in one transaction. The model must be usable, and of the task "
    "of the model the alias points to now (409 `alias_task_mismatch`: jobs already checked "
    "against it would fail); with `expected_model_id`, the alias must still point there (409 "
    "`alias_moved`). A rollback is a move back to the model before (see the history, or "
    "`POST .../rollback`). Needs `models:write` (or `admin`).",
    responses={200: {"description": _MOVED}, **problem_responses(403, 404, 409, 422)},
    dependencies=[models_write_scope],
)
async def set_alias(
    name: AliasName, alias: AliasLabel, body: AliasSet, services: ServicesDep, actor: Actor
) -> AliasMoved:
    moved, move = await services.models.aliases.move(
        name,
        alias,
        body.model,
        actor=actor,
        reason=body.reason,
        expected_model_id=ANY_TARGET if body.expected_model_id is None else body.expected_model_id,
    )
    return _moved(moved, move)


@router.post(
    f"{_PATH}/rollback",
    response_model=AliasMoved,
    summary="Move an alias back to its previous model",
    description="Moves the alias to where its last move took it from, if it still points "
    "where that move took it (409 `alias_has_no_previous` when the last move made it), as a "
    "PUT would: the move is recorded, and checked as a PUT's is. Needs `models:write`.",
    responses={200: {"description": _MOVED}, **problem_responses(403, 404, 409, 422)},
    dependencies=[models_write_scope],
)
async def roll_back_alias(
    name: AliasName,
    alias: AliasLabel,
    services: ServicesDep,
    actor: Actor,
    body: AliasRollback | None = None,
) -> AliasMoved:
    reason = None if body is None else body.reason
    moved, move = await services.models.aliases.rollback(name, alias, actor=actor, reason=reason)
    return _moved(moved, move)


@router.get(
    _PATH,
    response_model=AliasPublic,
    summary="Get an alias",
    responses=problem_responses(404, 422),
)
async def get_alias(name: AliasName, alias: AliasLabel, services: ServicesDep) -> AliasPublic:
    return AliasPublic.of(await services.models.aliases.get(name, alias))


@router.delete(
    _PATH,
    status_code=status.HTTP_204_NO_CONTENT,
    summary="Delete an alias",
    description="Jobs that name it and have not started fail at their start (`alias_not_found`); "
    "its history stays. Needs `models:write` (or `admin`).",
    responses=problem_responses(403, 404, 422),
    dependencies=[models_write_scope],
)
async def delete_alias(
    name: AliasName, alias: AliasLabel, services: ServicesDep, actor: Actor
) -> Response:
    await services.models.aliases.delete(name, alias, actor=actor)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get(
    f"{_PATH}/history",
    response_model=AliasHistory,
    summary="An alias's moves, newest first",
    description="Every move, kept: who, when, from and to which model, and why. Also after the "
    "alias was deleted.",
    responses=problem_responses(422),
)
async def alias_history(
    name: AliasName,
    alias: AliasLabel,
    services: ServicesDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[
        int | None, Query(ge=1, description="The `next_cursor` of the page before.")
    ] = None,
) -> AliasHistory:
    moves = await services.models.aliases.history(name, alias, limit=limit + 1, before_seq=cursor)
    page = moves[:limit]
    more = len(moves) > limit
    return AliasHistory(
        moves=[AliasMovePublic.of(move) for move in page],
        next_cursor=page[-1].seq if more else None,
    )


@router.get(
    "/v1/models/{name}/aliases",
    response_model=AliasList,
    summary="List the aliases of a model name",
    responses=problem_responses(422),
)
async def list_name_aliases(name: AliasName, services: ServicesDep) -> AliasList:
    return _listed(await services.models.aliases.list_aliases(name))


@router.get("/v1/aliases", response_model=AliasList, summary="List every alias")
async def list_aliases(services: ServicesDep) -> AliasList:
    return _listed(await services.models.aliases.list_aliases())


def _moved(alias: Alias, move: AliasMove) -> AliasMoved:
    return AliasMoved(**AliasPublic.of(alias).model_dump(), move=AliasMovePublic.of(move))


def _listed(aliases: list[Alias]) -> AliasList:
    return AliasList(aliases=[AliasPublic.of(alias) for alias in aliases])
