"""The configuration reference (docs/configuration.md), rendered from `Settings.model_fields`, so
that it cannot drift from the settings the server reads.

Regenerate it with `make docs`, or `python -m yolo_orch.config.reference > docs/configuration.md`;
tests/integration/test_docs.py fails when the file differs from what this renders.
"""

from __future__ import annotations

import enum
import json
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from yolo_orch.config import CONFIG_ENV_VAR, Settings
from yolo_orch.setting_hints import ENV_PREFIX

__all__ = ["groups", "render"]


def groups() -> dict[str, tuple[str, ...]]:
    """The settings by heading: each group class that `Settings` joins, in its order."""
    return {
        str(group.model_config.get("title")): tuple(group.__annotations__)
        for group in Settings.__mro__[1:]  # Settings itself adds no field
        if issubclass(group, BaseModel) and "title" in group.model_config
    }


# For the settings whose fields carry no description (config.example.toml's words); a field's own
# description wins once it has one.
_UNDESCRIBED: dict[str, str] = {
    "host": "Address to listen on; a non-loopback one needs `tokens` (or `allow_unauthenticated`).",
    "port": "TCP port to listen on.",
    "log_level": "The console's level; job log files always keep info and above.",
}

_INTRO = f"""\
# Configuration reference

<!-- Generated from yolo_orch.config.Settings by yolo_orch.config.reference: do not edit.
     Regenerate with `make docs`; tests/integration/test_docs.py checks it is current. -->

Settings come from embedded defaults, then a TOML file (`--config PATH` or
`{CONFIG_ENV_VAR}`), then `{ENV_PREFIX}<KEY>` environment variables (lists as JSON, nested keys
joined with `__`), then command-line flags. [`config.example.toml`](../config.example.toml)
documents every key with its default and what it does.

Relative paths (`data_dir`, `data_roots`, `model_roots`, `shared_data_roots`, the file of a
`sqlite+aiosqlite:///` `database_url`) are taken against the working directory once, when the
server starts, wherever they were set (file, environment or flag; `~` is the server user's
home): `make serve` keeps its data in `./var` of the folder it runs in. `ray_node_cache_dir` is a
folder on each Ray node, where the server's working directory means nothing: it must be
absolute.

A key of a table (`timeout_s`, `batch_max_images`) can be set on its own:
`{ENV_PREFIX}TIMEOUT_S__TRAINING=86400`.
"""


def render() -> str:
    """docs/configuration.md as it should read now."""
    fields = Settings.model_fields
    parts = [_INTRO]
    for title, names in groups().items():
        present = [name for name in names if name in fields]
        if not present:
            continue
        parts.append(f"\n## {title}\n\n| Key | Type | Default | Environment | Description |\n")
        parts.append("|---|---|---|---|---|\n")
        for name in present:
            parts.append(_row(name, fields[name]))
    return "".join(parts)


def _row(name: str, field: FieldInfo) -> str:
    cells = (
        f"`{name}`",
        _cell(_type(field.annotation)),
        _cell(_default(field)),
        f"`{ENV_PREFIX}{name.upper()}`",
        _text(field.description or _UNDESCRIBED.get(name, "")),
    )
    return "| " + " | ".join(cells) + " |\n"


def _type(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type(args[0])
    if origin is typing.Literal:
        return " \\| ".join(json.dumps(arg) for arg in args)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " \\| ".join(json.dumps(member.value) for member in annotation)
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join("None" if arg is type(None) else _type(arg) for arg in args)
    if origin in (list, tuple, set):
        return f"list[{', '.join(_type(arg) for arg in args if arg is not Ellipsis)}]"
    if origin is dict:
        return f"dict[{_type(args[0])}, {_type(args[1])}]"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation)


def _default(field: FieldInfo) -> str:
    value = field.get_default(call_default_factory=True)
    return _value(value)


def _value(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value, default=str)
    return repr(value)


def _cell(text: str) -> str:
    return f"`{text}`" if text else ""


def _text(text: str) -> str:
    return re.sub(r"\s+", " ", text).replace("|", "\\|").strip()


if __name__ == "__main__":
    sys.stdout.write(render())
