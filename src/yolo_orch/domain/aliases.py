"""Model aliases: `name@alias` (e.g. `detector@production`) names the model an alias points to
now, and moving the alias changes what every later job naming it runs. Plain values and the
reference grammar, in one place."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from yolo_orch.domain import MODEL_NAME_MAX_LENGTH, MODEL_NAME_PATTERN

ALIAS_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,62}$"
"""An alias: short, lower case, and never a URL path's own segment (it starts with a letter or
a digit)."""
ALIAS_SEPARATOR = "@"
"""Not a character a model name may hold, so `name@alias` is never a model's name."""
ALIAS_REF_PATTERN = f"{MODEL_NAME_PATTERN.removesuffix('$')}{ALIAS_SEPARATOR}{ALIAS_PATTERN[1:]}"
"""`name@alias`, as one pattern (a request field that must name an alias)."""

_NAME = re.compile(MODEL_NAME_PATTERN)
_ALIAS = re.compile(ALIAS_PATTERN)


@dataclass(frozen=True)
class AliasRef:
    """A reference to an alias: `name@alias`."""

    name: str
    alias: str

    def __str__(self) -> str:
        return f"{self.name}{ALIAS_SEPARATOR}{self.alias}"


def is_alias_name(alias: str) -> bool:
    return _ALIAS.fullmatch(alias) is not None


def is_model_name(name: str) -> bool:
    return len(name) <= MODEL_NAME_MAX_LENGTH and _NAME.fullmatch(name) is not None


def parse_alias_ref(ref: str) -> AliasRef | None:
    """The alias `ref` names, or None when it is no alias reference (a model's name or id, a
    runtime's own model, `job:<id>`). A reference with an `@` whose parts are not a model name
    and an alias is None too: the lookup then refuses it as an unknown model."""
    name, separator, alias = ref.partition(ALIAS_SEPARATOR)
    if not separator or not is_model_name(name) or not is_alias_name(alias):
        return None
    return AliasRef(name, alias)


@dataclass(frozen=True)
class Alias:
    """Where `name@alias` points now."""

    name: str
    alias: str
    model_id: str
    updated_at: datetime
    updated_by: str
    """The actor of the last move: a token's name, `anonymous`, or `chain:<job id>`."""

    @property
    def ref(self) -> AliasRef:
        return AliasRef(self.name, self.alias)


@dataclass(frozen=True)
class AliasMove:
    """One entry of an alias's history: a move, its creation or its deletion."""

    seq: int
    """Increasing over every alias's moves: the history's order and its page cursor."""
    name: str
    alias: str
    from_model_id: str | None
    """None: the move made the alias."""
    to_model_id: str | None
    """None: the move deleted the alias."""
    actor: str
    reason: str | None
    at: datetime


class AnyTarget(enum.Enum):
    """`expected_model_id` of a move that does not care where the alias points now."""

    ANY = "any"


ANY_TARGET = AnyTarget.ANY

Expected = Literal[AnyTarget.ANY] | str | None
"""What a compare-and-set move expects the alias to point to before it: `ANY_TARGET` (no
check), None (the alias must not exist yet), or a model id (it must point there still)."""
