"""A managed dataset as a zip, made while it is sent: never whole in memory nor on disk. Each
file is stored as it is (images are compressed already; label files are small), in one folder
named after the dataset, so that the zip unpacks to a dataset ultralytics reads (its data.yaml
says `path: .`)."""

from __future__ import annotations

import io
import os
import time
import zipfile
from collections.abc import Generator, Sequence
from pathlib import Path

__all__ = ["CHUNK_BYTES", "zip_chunks"]

CHUNK_BYTES = 1 << 20
"""About how much of the zip each chunk holds."""


class _Sink(io.RawIOBase):
    """Where zipfile writes: it keeps what was written until it is taken. Not seekable, so
    zipfile writes each file's sizes after its data (a data descriptor)."""

    def __init__(self) -> None:
        self._pending = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        self._pending += data
        return len(data)

    def take(self) -> bytes:
        taken = bytes(self._pending)
        self._pending.clear()
        return taken

    @property
    def pending(self) -> int:
        return len(self._pending)


def zip_chunks(folder: Path, files: Sequence[Path], top: str) -> Generator[bytes, None, None]:
    """The zip of `files` (inside `folder`) under the folder name `top`, in chunks of about
    CHUNK_BYTES. A file gone since it was listed is left out. Blocking: iterate it from a
    worker thread."""
    sink = _Sink()
    with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for path in files:
            try:
                source = path.open("rb")
            except FileNotFoundError:
                continue
            with source:
                stat = os.fstat(source.fileno())  # of the file opened, not one renamed in since
                name = f"{top}/{path.relative_to(folder)}"
                entry = zipfile.ZipInfo(name, time.localtime(stat.st_mtime)[:6])
                entry.file_size = stat.st_size
                with archive.open(entry, "w", force_zip64=stat.st_size >= 1 << 31) as out:
                    while block := source.read(CHUNK_BYTES):
                        out.write(block)
                        if sink.pending >= CHUNK_BYTES:
                            yield sink.take()
            if sink.pending >= CHUNK_BYTES:
                yield sink.take()
    yield sink.take()
