"""What refuses a change or a lookup of a model alias (`name@alias`)."""

from __future__ import annotations

from yolo_orch.errors.base import YoloOrchError
from yolo_orch.errors.codes import ErrorCode


class AliasNotFound(YoloOrchError):
    code = ErrorCode.ALIAS_NOT_FOUND

    def __init__(self, name: str, alias: str) -> None:
        super().__init__(
            f"no alias {name}@{alias}: set it with PUT /v1/models/{name}/aliases/{alias}"
        )
        self.name = name
        self.alias = alias


class AliasMoved(YoloOrchError):
    """A compare-and-set move found the alias elsewhere than it expected (moved meanwhile)."""

    code = ErrorCode.ALIAS_MOVED

    def __init__(self, name: str, alias: str, expected: str | None, current: str | None) -> None:
        wanted = "not to exist yet" if expected is None else f"to point to model {expected}"
        found = "does not exist" if current is None else f"points to model {current}"
        super().__init__(f"{name}@{alias} was expected {wanted}, but it {found}: nothing moved")
        self.name = name
        self.alias = alias
        self.expected = expected
        self.current = current


class AliasHasNoPrevious(YoloOrchError):
    """A rollback of an alias whose last move made it, or that was moved otherwise since."""

    code = ErrorCode.ALIAS_HAS_NO_PREVIOUS

    def __init__(self, name: str, alias: str) -> None:
        super().__init__(
            f"{name}@{alias} has no previous model to go back to: its last move made it; "
            "move it with PUT instead"
        )
        self.name = name
        self.alias = alias


class AliasTaskMismatch(YoloOrchError):
    code = ErrorCode.ALIAS_TASK_MISMATCH

    def __init__(self, name: str, alias: str, current_task: str, new_task: str) -> None:
        super().__init__(
            f"{name}@{alias} points to a {current_task} model; a {new_task} model would fail "
            f"the jobs already checked against it: delete the alias first to change its task"
        )
        self.name = name
        self.alias = alias


class ModelHasAliases(YoloOrchError):
    code = ErrorCode.MODEL_HAS_ALIASES

    def __init__(self, ref: str, aliases: list[str]) -> None:
        super().__init__(
            f"model {ref!r} is what {', '.join(aliases)} point(s) to: move or delete "
            "the alias(es) first"
        )
        self.ref = ref
        self.aliases = aliases
