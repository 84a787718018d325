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
    """Blocking (it walks directories): call it from a worker thread.

    A glob is expanded lazily and its walk stops at the first `max_files + 1` distinct files it
    matches: a `**/*` against a huge root costs no more than the limit allows. The result is the
    same as a full expansion's whenever the inputs are within the limit; past it, `too_many_files`
    is raised anyway (and what the rest of the walk would have found, such as a symlink leading
    outside the roots, is never looked at)."""
    if not roots:
        raise InvalidJob("this server has no data_roots configured", code="no_data_roots")
    real_roots = [Path(os.path.realpath(root)) for root in roots]
    files: dict[Path, None] = {}  # ordered and without duplicates
    for pattern in patterns:
        for path in _expand(pattern, real_roots, max_files + 1):
            files[path] = None
            if len(files) > max_files:
                raise InvalidJob(
                    f"the inputs name more than {max_files} files (max_files_per_job)",
                    code="too_many_files",
                )
    if not files:
        raise InvalidJob("the inputs name no files", code="no_inputs")
    return list(files)


def _expand(pattern: str, roots: list[Path], limit: int) -> list[Path]:
    """The regular files `pattern` names under the first root where it names any, in sorted
    order of the matched names. A glob stops once it has matched `limit` distinct files."""
    check_relative(pattern)
    for root in roots:
        if _is_glob(pattern):
            files = _glob_files(pattern, root, limit)
            if files:
                return files
            continue
        if (root / pattern).exists():
            path = _contained(root / pattern, root, pattern)
            if path.is_file():
                return [path]
            raise InvalidJob(f"{pattern!r} is not a regular file", code="input_not_found")
    raise InvalidJob(f"{pattern!r} matches no file under the data roots", code="input_not_found")


def _glob_files(pattern: str, root: Path, limit: int) -> list[Path]:
    matched: list[tuple[Path, Path]] = []  # (the name the glob matched, its real path)
    distinct: set[Path] = set()
    for match in glob.iglob(pattern, root_dir=root, recursive=True):
        path = _contained(root / match, root, pattern)
        if not path.is_file():
            continue
        matched.append((Path(match), path))
        distinct.add(path)
        if len(distinct) >= limit:
            break
    matched.sort(key=lambda pair: pair[0])
    return [path for _, path in matched]


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
