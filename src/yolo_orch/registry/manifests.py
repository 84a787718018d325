"""Fingerprints over a folder of files: a SHA-256 per file, and one digest over that manifest.

An exported model can be several files (OpenVINO: `.xml`, `.bin`, `metadata.yaml`), each of which
changes what runs; the digest covers all of them, their names, and that no file was added or
removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from yolo_orch.errors import ModelTampered, shown_path
from yolo_orch.registry.weights import sha256_file

_CHUNK = 1 << 20


@dataclass(frozen=True)
class Manifest:
    files: dict[str, str]
    """Path relative to the folder (`/`-separated) -> SHA-256 of its bytes."""
    size_bytes: int

    @property
    def digest(self) -> str:
        return manifest_digest(self.files)


def manifest_digest(files: Mapping[str, str]) -> str:
    canonical = json.dumps(dict(sorted(files.items())), separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def fingerprint_tree(folder: Path) -> Manifest:
    """Every regular file under `folder`. Links are refused: what they point at could change
    without the folder changing."""
    files: dict[str, str] = {}
    size = 0
    for path in _walk(folder):
        files[path.relative_to(folder).as_posix()] = sha256_file(path)
        size += path.stat().st_size
    return Manifest(files, size)


def copy_tree_hashing(source: Path, target: Path, name: str) -> Manifest:
    """Copy `source` (a file or a folder) to `target/name` in the new folder `target`, hashing
    what is written; every file is fsynced. The manifest is `fingerprint_tree(target)`'s."""
    target.mkdir(parents=True)
    files: dict[str, str] = {}
    size = 0
    for path in [source] if source.is_file() else _walk(source):
        inner = () if path == source else (path.relative_to(source).as_posix(),)
        relative = PurePosixPath(name, *inner)
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        with path.open("rb") as reader, destination.open("wb") as writer:
            while chunk := reader.read(_CHUNK):
                digest.update(chunk)
                writer.write(chunk)
                size += len(chunk)
            writer.flush()
            os.fsync(writer.fileno())
        files[relative.as_posix()] = digest.hexdigest()
    return Manifest(files, size)


def fingerprint_entry(entry: Path) -> Manifest:
    """The manifest `copy_tree_hashing(entry, target, entry.name)` would give."""
    if entry.is_file():
        return Manifest({entry.name: sha256_file(entry)}, entry.stat().st_size)
    inner = fingerprint_tree(entry)
    files = {f"{entry.name}/{path}": sha for path, sha in inner.files.items()}
    return Manifest(files, inner.size_bytes)


def verify_tree(
    folder: Path,
    files: Mapping[str, str],
    digest: str,
    sha256_of: Callable[[Path], str] | None = None,
) -> None:
    """Raise `ModelTampered` unless `folder` holds exactly `files` with their fingerprints (and
    `files` is the manifest `digest` was computed over). `sha256_of`: a file's digest, or
    "missing" where there is no file (default: read every file)."""
    if manifest_digest(files) != digest:
        raise ModelTampered(folder, digest, manifest_digest(files))
    present = (
        {p.relative_to(folder).as_posix() for p in _walk(folder)} if folder.is_dir() else set()
    )
    for extra in sorted(present - set(files)):
        raise ModelTampered(folder / extra, "no such file", "a file that was added")
    for name, expected in sorted(files.items()):
        path = folder / name
        actual = (sha256_of or _sha256_or_missing)(path)
        if actual != expected:
            raise ModelTampered(path, expected, actual)


def _sha256_or_missing(path: Path) -> str:
    return sha256_file(path) if path.is_file() else "missing"


def remove_tree(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)


def _walk(folder: Path) -> list[Path]:
    """The regular files under `folder`; a `ValueError` naming what else is there by its path
    from the folder's parent (a client reads it: not the server's path)."""
    found: list[Path] = []
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        for name in sorted(names):
            path = Path(root) / name
            if path.is_symlink() or not path.is_file():
                raise ValueError(f"{_shown(path, folder)} is not a regular file")
            found.append(path)
        for name in dirs:
            if (Path(root) / name).is_symlink():
                raise ValueError(f"{_shown(Path(root) / name, folder)} is a link")
    return found


def _shown(path: Path, folder: Path) -> str:
    return shown_path(path.relative_to(folder.parent).as_posix())
