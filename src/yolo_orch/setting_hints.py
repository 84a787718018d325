"""How a refusal tells the operator which setting to change: its name in the config file and its
environment variable, both built from the one name, so that no message names a variable that
does not exist. Imports nothing of the server's, so that `config` and `errors` can both use it."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError

ENV_PREFIX = "YOLO_ORCH_"
"""The prefix of every setting's environment variable (`Settings`' env_prefix)."""


def env_var(name: str) -> str:
    """The environment variable of the setting `name`."""
    return f"{ENV_PREFIX}{name.upper()}"


def named(name: str) -> str:
    """`name (YOLO_ORCH_NAME)`: a setting named where a message only mentions it."""
    return f"{name} ({env_var(name)})"


def set_setting(name: str, example: str | None = None) -> str:
    """`set NAME in the config file or YOLO_ORCH_NAME=EXAMPLE`, `example` being the variable's
    value as the environment gives it (JSON for a list), quoted for a shell."""
    variable = env_var(name) if example is None else f"{env_var(name)}={shlex.quote(example)}"
    return f"set {name} in the config file or {variable}"


def describe_invalid(exc: ValidationError) -> str:
    """A refused configuration, one line per mistake, each naming its setting and variable;
    pydantic's own text names only the field and adds its input and a web address."""
    lines = []
    for error in exc.errors(include_url=False):
        message = str(error["msg"]).removeprefix("Value error, ")
        if not error["loc"]:  # a check of several settings: its message names them
            lines.append(message)
            continue
        name = str(error["loc"][0])
        where = ".".join(str(part) for part in error["loc"])
        if error["type"] == "extra_forbidden":
            lines.append(f"{where} is not a setting: remove it (config file or {env_var(name)})")
        elif name in message:  # a validator of ours: it says what to do
            lines.append(message)
        else:
            lines.append(f"{where}: {message}: {set_setting(name)}")
    return "\n  ".join(lines)
