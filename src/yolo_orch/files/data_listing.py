"""One folder under a data root, listed for a client choosing a dataset or an input (the
dashboard's file picker, GET /v1/data-files), under the rules a submission's paths follow.

The folder is named by a root (its index in `data_roots`, or its folder's name) and a path
relative to it, checked as a submission's paths are (`check_relative`: no absolute path, no
`..`, no NUL) and resolved with symlinks followed: a folder whose real path is outside the root
is refused (`path_outside_roots`), as a file-system refusal is (`client_path_errors`). Reading
the folder spends a `WalkBudget` of the submissions' size and time (`max_walk_entries`,
`input_walk_timeout_s`): a folder holding more entries is refused (`input_walk_too_large`)
rather than read on. What is listed is what a submission could name: regular files and
folders, a symlink only where its real path is inside the root (one leading out, dangling or
looping is left out), and no name starting with "." (as globs skip them).

Blocking (it reads the file system): call it from a worker thread.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from yolo_orch.errors import PathOutsideRoots, no_data_roots
from yolo_orch.files.inputs import InputLimits, check_relative
from yolo_orch.files.paths import WalkBudget, client_path_errors, contained, real_path

__all__ = ["DataEntry", "DataFolder", "list_data_folder", "root_names"]

EntryKind = Literal["dir", "file"]


@dataclass(frozen=True)
class DataEntry:
    name: str
    kind: EntryKind
    size: int | None
    """A file's size in bytes; None for a folder."""


@dataclass(frozen=True)
class DataFolder:
    root: int
    """The root's index in `data_roots`."""
    path: str
    """The folder's path under the root, normalised ("" for the root itself)."""
    entries: list[DataEntry]
    """The page asked for: folders first, then files, each by name."""
    total: int
    """Entries the folder has, listed as `entries` are."""
    next_offset: int | None
    """The offset of the next page; None on the last."""


def root_names(roots: Sequence[Path]) -> list[str]:
    """Each root as a client knows it: its folder's name, never the server's path."""
    return [Path(root).name or str(index) for index, root in enumerate(roots)]


def _root_index(root: str, roots: Sequence[Path]) -> int:
    if not roots:
        raise no_data_roots()
    names = root_names(roots)
    if root.isdecimal() and len(root) <= 6 and int(root) < len(roots):
        return int(root)
    if root in names:
        return names.index(root)
    raise PathOutsideRoots(
        root,
        f"no data root has this index or name (the data roots: {', '.join(names)}; "
        f"or an index 0 to {len(roots) - 1})",
    )


def list_data_folder(
    roots: Sequence[Path],
    root: str,
    path: str,
    *,
    offset: int,
    limit: int,
    limits: InputLimits,
    clock: Callable[[], float] = time.monotonic,
) -> DataFolder:
    """The entries `offset` to `offset + limit` of the folder `path` under the root `root`."""
    index = _root_index(root, roots)
    given = path.strip()
    if given not in ("", "."):
        check_relative(given)
    relative = "" if given in ("", ".") else str(PurePosixPath(given))
    relative = "" if relative == "." else relative
    real_root = Path(real_path(roots[index], root))
    shown = relative or "."
    budget = WalkBudget(limits.max_walk_entries, limits.walk_timeout_s, clock)
    entries: list[DataEntry] = []
    with client_path_errors(shown):
        folder = contained(real_root / relative, real_root, shown) if relative else str(real_root)
        with os.scandir(folder) as listing:
            for entry in listing:
                budget.spend(shown)
                if not entry.name.startswith("."):
                    found = _entry(entry, real_root)
                    if found is not None:
                        entries.append(found)
    entries.sort(key=lambda e: (e.kind != "dir", e.name))
    page = entries[offset : offset + limit]
    following = offset + limit
    return DataFolder(
        root=index,
        path=relative,
        entries=page,
        total=len(entries),
        next_offset=following if following < len(entries) else None,
    )


def _entry(entry: os.DirEntry[str], root: Path) -> DataEntry | None:
    """The entry as a submission would see it: None where it could not name it."""
    try:
        if entry.is_symlink():
            real = os.path.realpath(entry.path)
            if not Path(real).is_relative_to(root):
                return None  # leads outside the root
            info = os.stat(real)
        else:
            info = entry.stat(follow_symlinks=False)
    except (OSError, RecursionError):
        return None  # dangling, looping, or gone since the folder was read
    if stat.S_ISDIR(info.st_mode):
        return DataEntry(entry.name, "dir", None)
    if stat.S_ISREG(info.st_mode):
        return DataEntry(entry.name, "file", info.st_size)
    return None
