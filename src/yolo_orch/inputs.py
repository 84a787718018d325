"""Resolving client-named files under the allowed data roots.

Clients name files relative to a root, globs allowed. Whatever they write, the files a job gets
are regular files whose real path (symlinks followed) lies inside one of the roots.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

from yolo_orch.errors import InvalidJob, PathOutsideRoots

_GLOB_CHARS = frozenset("*?[")


def resolve_inputs(patterns: Sequence[str], roots: Sequence[Path], max_files: int) -> list[Path]:
    """Blocking (it walks directories): call it from a worker thread."""
    if not roots:
        raise InvalidJob("this server has no data_roots configured", code="no_data_roots")
    real_roots = [Path(os.path.realpath(root)) for root in roots]
    files: dict[Path, None] = {}  # ordered and without duplicates
    for pattern in patterns:
        for path in _expand(pattern, real_roots):
            files[path] = None
            if len(files) > max_files:
                raise InvalidJob(
                    f"the inputs name more than {max_files} files (max_files_per_job)",
                    code="too_many_files",
                )
    if not files:
        raise InvalidJob("the inputs name no files", code="no_inputs")
    return list(files)


def _expand(pattern: str, roots: list[Path]) -> list[Path]:
    check_relative(pattern)
    for root in roots:
        if _is_glob(pattern):
            candidates = sorted(
                Path(match) for match in glob.glob(pattern, root_dir=root, recursive=True)
            )
        else:
            candidates = [Path(pattern)] if (root / pattern).exists() else []
        found = [_contained(root / candidate, root, pattern) for candidate in candidates]
        files = [path for path in found if path.is_file()]
        if files:
            return files
        if candidates and not _is_glob(pattern):
            raise InvalidJob(f"{pattern!r} is not a regular file", code="input_not_found")
    raise InvalidJob(f"{pattern!r} matches no file under the data roots", code="input_not_found")


def check_relative(pattern: str) -> None:
    if "\x00" in pattern:
        raise PathOutsideRoots(pattern, "it contains a NUL byte")
    if pattern.startswith(("/", "\\", "~")) or PurePosixPath(pattern).is_absolute():
        raise PathOutsideRoots(pattern, "absolute paths are not allowed")
    if ".." in PurePosixPath(pattern).parts:
        raise PathOutsideRoots(pattern, "'..' is not allowed")


def _contained(path: Path, root: Path, pattern: str) -> Path:
    real = Path(os.path.realpath(path))
    if not real.is_relative_to(root):
        raise PathOutsideRoots(pattern, "it leads outside the data roots")
    return real


def _is_glob(pattern: str) -> bool:
    return any(char in _GLOB_CHARS for char in pattern)
