"""`--help` that reads as prose: typer shows each option's Python type (`<bool>` beside a flag,
`<str>`, `<int range>`) and, in the commands list, keeps the line breaks of a docstring's
source, breaking sentences mid-way. The root group of `yolo-orch` tidies every command below it
once, before any of them parses or prints help."""

from __future__ import annotations

import inspect
from typing import Any

from typer.core import TyperArgument, TyperGroup, TyperOption

# typer carries its own copy of click: its commands, parameters and contexts are not `click`'s
# classes, and are typed `Any` here.


class PlainHelpGroup(TyperGroup):
    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        _plain_params(params)
        for command in self.commands.values():
            _plain_command(command, ctx)
        return params


def _plain_command(command: Any, ctx: Any) -> None:
    command.help = _prose(command.help)
    command.short_help = _prose(command.short_help)
    _plain_params(command.get_params(ctx))
    if isinstance(command, TyperGroup):
        for sub in command.commands.values():
            _plain_command(sub, ctx)


def _plain_params(params: list[Any]) -> None:
    """A flag shows no value; an option without a metavar shows its name (`--host HOST`) or
    its choices (`jobs|admin`); an argument shows its name alone."""
    for param in params:
        if isinstance(param, TyperArgument):
            # Its name is in the first column already; typer would add its type to it.
            param.display_type_rich = _no_type  # type: ignore[method-assign]
        if not isinstance(param, TyperOption) or param.metavar is not None:
            continue
        if param.is_flag:
            param.metavar = ""
        elif param.type_descriptor.is_choice:
            choices = param.type_descriptor.choices or ()
            param.metavar = "|".join(str(choice) for choice in choices)
        elif param.name:
            param.metavar = param.name.upper()


def _no_type(ctx: Any) -> None:
    return None


def _prose(text: str | None) -> str | None:
    """Each paragraph one line: the terminal wraps it. A paragraph starting with `\\b` keeps
    its lines (click's mark for a list)."""
    if not text:
        return text
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(p if p.startswith("\b") else " ".join(p.split("\n")) for p in paragraphs)
