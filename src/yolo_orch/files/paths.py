"""Client-named paths under allowed roots: real paths, containment, file-system errors as the
client's errors, and a bounded glob walk.

`glob.iglob` follows symlinked folders without remembering where it has been, so `loop/**/*.jpg`
over a folder holding a symlink to itself never ends, and nothing stops a walk over millions of
entries. `glob_files` instead
- enters each real folder (`st_dev`, `st_ino`) at most once per position in the pattern: a symlink
  back into a folder already walked (a loop, or a second link to one folder) is not walked again;
- spends one unit of a `WalkBudget` per directory entry it reads and per name it looks up, and
  the budget checks its deadline each time, so a walk past either stops (`input_walk_too_large`)
  within one entry's time and frees its thread (a thread cannot be killed from outside);
- never enters a folder, nor returns a file, whose real path is outside the root.
As with glob, wildcards and `**` skip names starting with "." unless the pattern segment itself
starts with "."; a segment without wildcards is looked up, not listed; `**` as a whole segment
matches zero or more folders.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from yolo_orch.errors import ErrorCode, InputWalkTooLarge, InvalidPath, PathOutsideRoots

_GLOB_CHARS = frozenset("*?[")
_CODES = {
    errno.ENAMETOOLONG: ErrorCode.PATH_TOO_LONG,
    errno.ELOOP: ErrorCode.PATH_SYMLINK_LOOP,
    errno.ENOTDIR: ErrorCode.PATH_NOT_A_DIRECTORY,
    errno.EACCES: ErrorCode.PATH_PERMISSION_DENIED,
    errno.EPERM: ErrorCode.PATH_PERMISSION_DENIED,
}


def path_error(exc: OSError, shown: str) -> InvalidPath:
    """The client's error for a file-system error met on a path the client named."""
    why = exc.strerror or type(exc).__name__
    return InvalidPath(
        shown, why[:1].lower() + why[1:], _CODES.get(exc.errno or 0, ErrorCode.INVALID_PATH)
    )


@contextmanager
def client_path_errors(shown: str) -> Iterator[None]:
    """Turn the `OSError`s of the block into `InvalidPath` naming `shown`."""
    try:
        yield
    except OSError as exc:
        raise path_error(exc, shown) from None


def real_path(path: str | Path, shown: str) -> str:
    """`os.path.realpath`, which follows a chain of symlinks by recursion: a chain longer than
    the interpreter's recursion limit is refused like a loop; a name with a NUL byte (which
    no file has: a data.yaml can still write one) is refused too."""
    if "\x00" in str(path):
        raise PathOutsideRoots(shown, "it contains a NUL byte")
    try:
        return os.path.realpath(path)
    except RecursionError:
        raise path_error(OSError(errno.ELOOP, os.strerror(errno.ELOOP)), shown) from None


def contained(path: str | Path, root: Path, shown: str, roots_name: str = "data roots") -> str:
    """The real path of `path`, which must lie inside `root` (itself a real path)."""
    real = real_path(path, shown)
    if not Path(real).is_relative_to(root):
        raise PathOutsideRoots(shown, f"it leads outside the {roots_name}")
    return real


def is_glob(pattern: str) -> bool:
    return any(char in _GLOB_CHARS for char in pattern)


@dataclass
class WalkBudget:
    """What one request's path resolution may spend, over all its patterns."""

    max_entries: int
    timeout_s: float
    clock: Callable[[], float] = time.monotonic
    entries: int = field(default=0, init=False)
    deadline: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self.deadline = self.clock() + self.timeout_s

    def spend(self, pattern: str) -> None:
        self.entries += 1
        if self.entries > self.max_entries:
            raise InputWalkTooLarge(
                pattern, f"it visited more than {self.max_entries} entries (max_walk_entries)"
            )
        if self.clock() > self.deadline:
            raise InputWalkTooLarge(
                pattern, f"it took longer than {self.timeout_s:g} s (input_walk_timeout_s)"
            )


@dataclass(frozen=True)
class _Folder:
    real: str
    """Its real path: listed by that, so what the walk reads is what it checked."""
    name: tuple[str, ...]
    """Its path under the root as the pattern matched it (link names, not targets)."""
    position: int
    """The pattern segment to match against its entries."""
    descend: bool = False
    """At a `**` that is not the last segment: list it for the subfolders `**` goes on into."""


def glob_files(pattern: str, root: Path, budget: WalkBudget, limit: int) -> list[Path]:
    """The real paths of the regular files `pattern` matches under `root` (a real path), sorted
    by the names matched; the walk stops once it has matched `limit` distinct files."""
    segments = _segments(pattern)
    matched: list[tuple[tuple[str, ...], str]] = []
    distinct: set[str] = set()
    for name, real in _walk(segments, root, pattern, budget):
        matched.append((name, real))
        distinct.add(real)
        if len(distinct) >= limit:
            break
    matched.sort()
    return [Path(real) for _, real in matched]


def _segments(pattern: str) -> list[str]:
    segments: list[str] = []
    for part in PurePosixPath(pattern).parts:
        if not (part == "**" and segments and segments[-1] == "**"):
            segments.append(part)
    return segments


def _walk(
    segments: list[str], root: Path, pattern: str, budget: WalkBudget
) -> Iterator[tuple[tuple[str, ...], str]]:
    """(matched name, real path) of each regular file matched, depth first with the subfolders
    of each folder in sorted order (an explicit stack: a deep tree must not reach the recursion
    limit)."""
    stack = [_Folder(str(root), (), 0)]
    entered: set[tuple[int, int, int]] = set()
    last = len(segments) - 1
    while stack:
        folder = stack.pop()
        children: list[_Folder] = []
        if folder.descend:
            for entry in _listing(folder, pattern, budget):
                if not entry.name.startswith("."):
                    children.extend(_subfolder(entry, folder, root, folder.position))
        elif _first_time(folder, entered):
            segment = segments[folder.position]
            final = folder.position == last
            if segment == "**" and not final:
                # Zero folders first, so a walk that stops early lists no more than it must.
                stack.append(replace(folder, descend=True))
                children.append(replace(folder, position=folder.position + 1))
            elif segment == "**":
                for entry in _listing(folder, pattern, budget):
                    if not entry.name.startswith("."):
                        yield from _entry_file(entry, folder, root)
                        children.extend(_subfolder(entry, folder, root, folder.position))
            elif is_glob(segment):
                hidden_too = segment.startswith(".")
                for entry in _listing(folder, pattern, budget):
                    if not fnmatch.fnmatchcase(entry.name, segment) or (
                        entry.name.startswith(".") and not hidden_too
                    ):
                        continue
                    if final:
                        yield from _entry_file(entry, folder, root)
                    else:
                        children.extend(_subfolder(entry, folder, root, folder.position + 1))
            else:
                budget.spend(pattern)
                found = _lookup(segment, folder, root, final)
                if found is not None and final:
                    yield found
                elif found is not None:
                    children.append(_Folder(found[1], found[0], folder.position + 1))
        stack.extend(sorted(children, key=lambda child: child.name, reverse=True))


def _first_time(folder: _Folder, entered: set[tuple[int, int, int]]) -> bool:
    """Whether the walk is at this real folder and pattern position for the first time."""
    try:
        info = os.stat(folder.real)
    except FileNotFoundError:
        return False  # removed while we walk
    except OSError as exc:
        raise path_error(exc, _shown(folder.name)) from None
    key = (info.st_dev, info.st_ino, folder.position)
    if key in entered:
        return False
    entered.add(key)
    return True


def _listing(folder: _Folder, pattern: str, budget: WalkBudget) -> Iterator[os.DirEntry[str]]:
    """The folder's entries as they are read (a walk that stops early reads no further)."""
    try:
        with os.scandir(folder.real) as listing:
            for entry in listing:
                budget.spend(pattern)
                yield entry
    except FileNotFoundError:
        return  # removed while we walk
    except OSError as exc:
        raise path_error(exc, _shown(folder.name)) from None


def _lookup(
    segment: str, folder: _Folder, root: Path, final: bool
) -> tuple[tuple[str, ...], str] | None:
    """A segment without wildcards: (name, real path) of the regular file (`final`) or of the
    folder it names, if there is one."""
    path = os.path.join(folder.real, segment)
    name = (*folder.name, segment)
    try:
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):
            real = contained(path, root, _shown(name))
            mode = os.stat(real).st_mode
        else:
            real = path
    except (FileNotFoundError, NotADirectoryError):
        return None  # nothing by that name (a dangling link included)
    except OSError as exc:
        raise path_error(exc, _shown(name)) from None
    wanted = stat.S_ISREG(mode) if final else stat.S_ISDIR(mode)
    return (name, real) if wanted else None


def _subfolder(
    entry: os.DirEntry[str], folder: _Folder, root: Path, position: int
) -> list[_Folder]:
    """The entry as a folder to walk at `position`, if it is one."""
    name = (*folder.name, entry.name)
    try:
        if not entry.is_dir():
            return []
    except OSError:
        return []  # a symlink loop is no folder to walk
    real = contained(entry.path, root, _shown(name)) if entry.is_symlink() else entry.path
    return [_Folder(real, name, position)]


def _entry_file(
    entry: os.DirEntry[str], folder: _Folder, root: Path
) -> Iterator[tuple[tuple[str, ...], str]]:
    """The match, if it is a regular file (symlinks followed, and inside the root)."""
    name = (*folder.name, entry.name)
    if not entry.is_symlink():
        if entry.is_file(follow_symlinks=False):
            yield name, entry.path
        return
    real = contained(entry.path, root, _shown(name))
    try:
        regular = stat.S_ISREG(os.stat(real).st_mode)
    except OSError:
        return  # a dangling link or a loop: not a file a glob matches
    if regular:
        yield name, real


def _shown(name: tuple[str, ...]) -> str:
    return "/".join(name) or "."
