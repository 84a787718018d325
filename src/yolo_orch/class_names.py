"""Limits on the class names a dataset or a model brings: they are copied into every job that
trains on the dataset, into the registry and so into every `GET /v1/models`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from yolo_orch.errors import InvalidJob

__all__ = [
    "DEFAULT_CLASS_NAME_LIMITS",
    "DEFAULT_MAX_CLASS_NAMES",
    "DEFAULT_MAX_CLASS_NAMES_BYTES",
    "ClassNameLimits",
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
                code="class_names_too_large",
            )
        size = sum(len(name.encode("utf-8", "surrogatepass")) for name in names)
        if size > self.max_bytes:
            raise InvalidJob(
                f"{owner}'s class names take {size} bytes; this server allows {self.max_bytes} "
                "(max_class_names_bytes)",
                code="class_names_too_large",
            )


DEFAULT_CLASS_NAME_LIMITS = ClassNameLimits()
