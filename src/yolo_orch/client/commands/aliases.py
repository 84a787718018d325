"""`yolo-orch alias`: model aliases (`name@alias`): point one to a model, show, list, delete,
roll back, and its history."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from yolo_orch.client.aliases import AliasMoved, AliasPublic
from yolo_orch.client.commands.common import AsJson, Token, Url, connect, out, show
from yolo_orch.client.help_text import PlainHelpGroup
from yolo_orch.client.render import to_json
from yolo_orch.client.wire import DEFAULT_URL
from yolo_orch.domain.aliases import AliasRef, parse_alias_ref

alias_app = typer.Typer(
    help="Model aliases: `name@alias` names the model it points to now.",
    no_args_is_help=True,
    cls=PlainHelpGroup,
)

Ref = Annotated[
    str,
    typer.Argument(
        metavar="NAME@ALIAS", help="The alias, e.g. detector@production.", show_default=False
    ),
]
Reason = Annotated[
    str | None,
    typer.Option(metavar="TEXT", help="Why: kept in the history.", show_default=False),
]


def _ref(text: str) -> AliasRef:
    ref = parse_alias_ref(text)
    if ref is None:
        raise typer.BadParameter(
            f"{text!r} is not NAME@ALIAS (an alias: lower case letters, digits, '.', '_', '-')",
            param_hint="NAME@ALIAS",
        )
    return ref


def _moved_line(moved: AliasMoved) -> str:
    before = moved.move.from_model_id or "nothing"
    return f"{moved.ref} -> {moved.model_id} (was {before}; by {moved.updated_by})"


@alias_app.command("set")
def alias_set(
    ref: Ref,
    model: Annotated[
        str,
        typer.Argument(
            metavar="MODEL", help="A model's id or name, or another NAME@ALIAS.", show_default=False
        ),
    ],
    reason: Reason = None,
    expect: Annotated[
        str | None,
        typer.Option(
            metavar="MODEL_ID",
            help="Move only if the alias points to this model now.",
            show_default=False,
        ),
    ] = None,
    as_json: AsJson = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Point an alias to a model (made if new). Jobs naming it run that model from now on;
    running streams naming it switch to it. Needs a models:write token."""
    alias = _ref(ref)
    with connect(url, token) as client:
        moved = client.set_alias(
            alias.name, alias.alias, model, reason=reason, expected_model_id=expect
        )
    show(moved, as_json, _moved_line(moved))


@alias_app.command("rollback")
def alias_rollback(
    ref: Ref,
    reason: Reason = None,
    as_json: AsJson = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Move an alias back to the model its last move took it from."""
    alias = _ref(ref)
    with connect(url, token) as client:
        moved = client.rollback_alias(alias.name, alias.alias, reason=reason)
    show(moved, as_json, _moved_line(moved))


@alias_app.command("get")
def alias_get(
    ref: Ref, as_json: AsJson = False, url: Url = DEFAULT_URL, token: Token = None
) -> None:
    """Show where an alias points."""
    alias = _ref(ref)
    with connect(url, token) as client:
        found = client.alias(alias.name, alias.alias)
    since = f"{found.updated_at:%Y-%m-%d %H:%M:%S}"
    show(found, as_json, f"{found.ref} -> {found.model_id} (since {since}, by {found.updated_by})")


@alias_app.command("list")
def alias_list(
    name: Annotated[
        str | None,
        typer.Argument(metavar="NAME", help="Only the aliases of this name.", show_default=False),
    ] = None,
    as_json: AsJson = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """List the aliases (of one name, if given)."""
    with connect(url, token) as client:
        found = client.aliases(name)
    if as_json:
        typer.echo(to_json({"aliases": [a.model_dump(mode="json") for a in found]}))
        return
    out().print(_aliases_table(found) if found else "no aliases")


@alias_app.command("rm")
def alias_rm(ref: Ref, url: Url = DEFAULT_URL, token: Token = None) -> None:
    """Delete an alias (its history stays). Needs a models:write token."""
    alias = _ref(ref)
    with connect(url, token) as client:
        client.delete_alias(alias.name, alias.alias)
    typer.echo(f"deleted alias {alias}")


@alias_app.command("history")
def alias_history(
    ref: Ref,
    limit: Annotated[int, typer.Option(min=1, max=500, help="Moves to show.")] = 20,
    as_json: AsJson = False,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """An alias's moves, newest first: when, who, from, to, why."""
    alias = _ref(ref)
    with connect(url, token) as client:
        page = client.alias_history(alias.name, alias.alias, limit=limit)
    if as_json:
        typer.echo(to_json(page))
        return
    table = Table("when", "who", "from", "to", "why")
    for move in page.moves:
        table.add_row(
            f"{move.at:%Y-%m-%d %H:%M:%S}",
            move.actor,
            move.from_model_id or "-",
            move.to_model_id or "(deleted)",
            move.reason or "",
        )
    out().print(table if page.moves else f"{alias} has no history")


def _aliases_table(aliases: list[AliasPublic]) -> Table:
    table = Table("alias", "model", "since", "by")
    for alias in aliases:
        table.add_row(
            alias.ref, alias.model_id, f"{alias.updated_at:%Y-%m-%d %H:%M:%S}", alias.updated_by
        )
    return table
