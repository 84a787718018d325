"""Resolving client-named files under the allowed data roots, and reading them at run time.

Clients name files relative to a root, globs allowed. Whatever they write, the files a job gets
are regular files whose real path (symlinks followed) lies inside one of the roots; resolving
them is bounded in entries visited and in time (`paths.WalkBudget`). At run time each file is
checked again where it is opened (`open_contained`): what was inside the roots at submission
may have been swapped for a symlink since.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from yolo_orch.errors import (
    ErrorCode,
    InvalidJob,
    InvalidJobInput,
    PathOutsideRoots,
    no_data_roots,
    shown_path,
)
from yolo_orch.files.paths import WalkBudget, client_path_errors, contained, glob_files, is_glob


@dataclass(frozen=True)
class InputLimits:
    max_files: int
    """Distinct files all the inputs of one job may name (`max_files_per_job`)."""
    max_walk_entries: int
    """Directory entries and names resolving them may visit, over all patterns."""
    walk_timeout_s: float
    """Time resolving them may take."""


def resolve_inputs(
    patterns: Sequence[str],
    roots: Sequence[Path],
    limits: InputLimits,
    *,
    clock: Callable[[], float] = time.monotonic,
) -> list[Path]:
    """Blocking (it walks directories): call it from a worker thread. It returns or raises
    within about `limits.walk_timeout_s`, whatever the patterns and the file system hold.

    A glob's walk stops at the first `max_files + 1` distinct files it matches: a `**/*`
    against a huge root costs no more than the limit allows. The result is the same as a full
    expansion's whenever the inputs are within the limit; past it, `too_many_files` is raised
    anyway (and what the rest of the walk would have found, such as a symlink leading outside
    the roots, is never looked at)."""
    if not roots:
        raise no_data_roots()
    real_roots = [Path(os.path.realpath(root)) for root in roots]
    budget = WalkBudget(limits.max_walk_entries, limits.walk_timeout_s, clock)
    max_files = limits.max_files
    files: dict[Path, None] = {}  # ordered and without duplicates
    for pattern in patterns:
        for path in _expand(pattern, real_roots, budget, max_files + 1):
            files[path] = None
            if len(files) > max_files:
                raise InvalidJob(
                    f"the inputs name more than {max_files} files (max_files_per_job)",
                    code=ErrorCode.TOO_MANY_FILES,
                )
    if not files:
        raise InvalidJob("the inputs name no files", code=ErrorCode.NO_INPUTS)
    return list(files)


def _expand(pattern: str, roots: list[Path], budget: WalkBudget, limit: int) -> list[Path]:
    """The regular files `pattern` names under the first root where it names any, in sorted
    order of the matched names. A glob stops once it has matched `limit` distinct files."""
    check_relative(pattern)
    for root in roots:
        if is_glob(pattern):
            files = glob_files(pattern, root, budget, limit)
            if files:
                return files
            continue
        budget.spend(pattern)
        path = _plain_file(pattern, root)
        if path is not None:
            return [path]
    raise InvalidJob(
        f"{shown_path(pattern)} matches no file under the data roots",
        code=ErrorCode.INPUT_NOT_FOUND,
    )


def _plain_file(pattern: str, root: Path) -> Path | None:
    """The file `pattern` (no wildcards) names under `root`; None if nothing is there."""
    candidate = root / pattern
    with client_path_errors(pattern):
        try:
            os.lstat(candidate)
            real = contained(candidate, root, pattern)
            mode = os.stat(real).st_mode
        except FileNotFoundError:
            return None  # a dangling link included
    if not stat.S_ISREG(mode):
        raise InvalidJob(
            f"{shown_path(pattern)} is not a regular file", code=ErrorCode.INPUT_NOT_FOUND
        )
    return Path(real)


def check_relative(pattern: str) -> None:
    if "\x00" in pattern:
        raise PathOutsideRoots(pattern, "it contains a NUL byte")
    if pattern.startswith(("/", "\\", "~")) or PurePosixPath(pattern).is_absolute():
        raise PathOutsideRoots(pattern, "absolute paths are not allowed")
    if ".." in PurePosixPath(pattern).parts:
        raise PathOutsideRoots(pattern, "'..' is not allowed")


@contextmanager
def open_contained(path: Path, roots: Sequence[Path]) -> Iterator[BinaryIO]:
    """The regular file at `path`, opened only if it lies inside one of `roots` where it is
    opened. Raises `InvalidJobInput` saying why not, without server paths.

    For run time: a file that was inside the roots at submission may since have been replaced
    by a symlink leading out, or a folder on its path may have. So the path is resolved and
    checked again, its last component is opened without following a symlink (one swapped in
    after the check is refused), and the path of the file actually opened is checked once more
    (a folder swapped in between is caught). Opening does not block on a FIFO."""
    real_roots = [Path(os.path.realpath(root)) for root in roots]
    try:
        real = os.path.realpath(path)
    except RecursionError:
        raise InvalidJobInput("cannot read the file: a chain of symlinks too long") from None
    if not _inside(real, real_roots):
        raise InvalidJobInput("refused: the file now leads outside the data roots")
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(real, flags)
    except OSError as e:
        raise InvalidJobInput(f"cannot read the file: {e.strerror or e}") from None
    with os.fdopen(fd, "rb") as file:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            raise InvalidJobInput("refused: not a regular file")
        if not _inside(_opened_path(fd, real, opened), real_roots):
            raise InvalidJobInput("refused: the file now leads outside the data roots")
        yield file


def opened_name(file: BinaryIO, path: Path) -> str:
    """A path that names the open `file` itself, for libraries that open files by name (OpenCV's
    video reader): its `/proc/self/fd` link where there is one, so a swap of the checked path
    cannot change what they read; else `path`, the name it was opened by."""
    link = f"/proc/self/fd/{file.fileno()}"
    return link if os.path.exists(link) else str(path)


def _opened_path(fd: int, expected: str, opened: os.stat_result) -> str:
    """Where the open file `fd` really is: the kernel's name for it where /proc has one; else
    `expected` if that path still names the same file."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        pass
    try:
        now = os.stat(expected)
    except OSError:
        return ""
    same = (now.st_dev, now.st_ino) == (opened.st_dev, opened.st_ino)
    return expected if same else ""


def _inside(path: str, roots: Sequence[Path]) -> bool:
    return bool(path) and any(Path(path).is_relative_to(root) for root in roots)
