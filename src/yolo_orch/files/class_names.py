"""Limits on the class names a dataset or a model brings: they are copied into every job that
trains on the dataset, into the registry and so into every `GET /v1/models`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from yolo_orch.errors import ErrorCode, InvalidJob

__all__ = [
    "DEFAULT_CLASS_NAME_LIMITS",
    "DEFAULT_MAX_CLASS_NAMES",
    "DEFAULT_MAX_CLASS_NAMES_BYTES",
    "ClassNameLimits",
    "in_id_order",
]

DEFAULT_MAX_CLASS_NAMES = 10_000
DEFAULT_MAX_CLASS_NAMES_BYTES = 256 * 1024
"""UTF-8 bytes of all names together: 10 000 names of 26 characters."""


@dataclass(frozen=True)
class ClassNameLimits:
    max_names: int = DEFAULT_MAX_CLASS_NAMES
    max_bytes: int = DEFAULT_MAX_CLASS_NAMES_BYTES

    def check(self, names: Sequence[str], owner: str) -> None:
        """Raise `InvalidJob` (`class_names_too_large`) when `owner`'s names pass a limit."""
        if len(names) > self.max_names:
            raise InvalidJob(
                f"{owner} has {len(names)} class names; this server allows {self.max_names} "
                "(max_class_names)",
                code=ErrorCode.CLASS_NAMES_TOO_LARGE,
            )
        size = sum(len(name.encode("utf-8", "surrogatepass")) for name in names)
        if size > self.max_bytes:
            raise InvalidJob(
                f"{owner}'s class names take {size} bytes; this server allows {self.max_bytes} "
                "(max_class_names_bytes)",
                code=ErrorCode.CLASS_NAMES_TOO_LARGE,
            )


DEFAULT_CLASS_NAME_LIMITS = ClassNameLimits()


def in_id_order(names: Mapping[object, object]) -> list[object] | None:
    """The values of a class-id-to-name mapping in id order, when its keys are exactly the
    ints 0..n-1 (not bools, floats or strings); None otherwise."""
    ids = [key for key in names if isinstance(key, int) and not isinstance(key, bool)]
    if sorted(ids) != [*range(len(names))]:
        return None
    return [names[i] for i in range(len(names))]
