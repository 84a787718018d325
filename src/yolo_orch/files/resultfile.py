"""A job's result file, laid out so that it is served whole or a page at a time straight from
disk, never parsed or held in memory whole.

`result.json` is the full result, as `GET /v1/jobs/{id}/result` returns it. When the result has
per-image entries (`images`), each entry is on a line of its own, after the other keys:

    {"summary":...,"images":[
    {"source":"a.jpg",...},
    {"source":"b.jpg",...}
    ]}

JSON text never holds a raw newline inside a value, so a line is an entry. `result.index` holds,
for each entry, the byte offsets where it starts and ends in `result.json` (two unsigned 64-bit
little-endian integers), so entries `i..j` are one contiguous byte range of the file (the
`,\\n` between them is JSON whitespace and a separator). Results without entries (training) have
no index; results written before the index existed are paged by parsing them.

A video's frames are written as they are made to a JSON Lines file (`EntryLog`), one frame a
line, with an index of the same layout; `read_page(..., lines=True)` pages it the same way.
"""

from __future__ import annotations

import io
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import anyio
import orjson

from yolo_orch.errors import ResultTooLarge

__all__ = [
    "DEFAULT_INLINE_RESULT_BYTES",
    "DEFAULT_MAX_RESULT_BYTES",
    "ENTRIES_KEY",
    "FRAMES_KEY",
    "EntryLog",
    "EntryPage",
    "encode_small",
    "page_of",
    "read_page",
    "write_result",
]

DEFAULT_MAX_RESULT_BYTES = 128 << 20
DEFAULT_INLINE_RESULT_BYTES = 64 << 10
"""Results up to this size are committed with the job's outcome rather than written to a file:
for a small job, a file, its fsync and its folder's cost more than the run
(`bench.admission --zero`)."""
ENTRIES_KEY = "images"
FRAMES_KEY = "frames"
_SPAN = struct.Struct("<QQ")
_CHUNK_BYTES = 1 << 16


def _dumps(value: Any) -> bytes:
    """Compact JSON; orjson writes a 300-detection entry about 10x faster than `json`."""
    return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY)


def write_result(file: BinaryIO, detail: dict[str, Any], max_bytes: int) -> bytes | None:
    """Write `detail` as JSON to `file`, one entry a line; returns the index of its entries (None
    when it has none). Raises `ResultTooLarge` as soon as the file would pass `max_bytes`."""
    out = _BoundedWriter(file, max_bytes)
    entries = detail.get(ENTRIES_KEY)
    if not isinstance(entries, list):
        out.write(_dumps(detail))
        return None
    rest = {key: value for key, value in detail.items() if key != ENTRIES_KEY}
    out.write(_dumps(rest)[:-1] + (b"," if rest else b"") + _dumps(ENTRIES_KEY) + b":[")
    index = bytearray()
    for number, entry in enumerate(entries):
        out.write(b",\n" if number else b"\n")
        start = out.written
        out.write(_dumps(entry))
        index += _SPAN.pack(start, out.written)
    out.write(b"\n]}")
    return bytes(index)


def encode_small(detail: dict[str, Any], limit: int) -> bytes | None:
    """`detail` as `write_result` lays it out, if that takes at most `limit` bytes; else None
    (encoding stops as soon as it passes `limit`)."""
    buffer = io.BytesIO()
    try:
        write_result(buffer, detail, limit)
    except ResultTooLarge:
        return None
    return buffer.getvalue()


class EntryLog:
    """A JSON Lines file written an entry at a time, and its index, so that entries never need
    to be held in memory and a page of them is read like a result file's. Opening it truncates
    both files (what an earlier attempt wrote)."""

    def __init__(self, path: Path, index: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        index.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("wb")
        self._index = index.open("wb")
        self._written = 0
        self.count = 0

    def append(self, entry: dict[str, Any]) -> None:
        line = _dumps(entry)
        self._file.write(line + b"\n")
        self._index.write(_SPAN.pack(self._written, self._written + len(line)))
        self._written += len(line) + 1
        self.count += 1

    def flush(self) -> None:
        """Make what was appended readable by others (the artifact of a job still running)."""
        self._file.flush()
        self._index.flush()

    def close(self) -> None:
        self._file.close()
        self._index.close()


@dataclass(frozen=True)
class EntryPage:
    """Entries `offset .. offset + count - 1` of `total`, as JSON array items joined by commas."""

    total: int
    offset: int
    count: int
    file: Path | None = None
    """Where the entries are, at `span` (start and end byte offsets); or in `inline`."""
    span: tuple[int, int] = (0, 0)
    inline: bytes = b""
    key: str = ENTRIES_KEY
    lines: bool = False
    """The file is JSON Lines: entries are separated by newlines, not by commas."""

    @property
    def next_offset(self) -> int | None:
        end = self.offset + self.count
        return end if end < self.total else None

    async def json(self, limit: int) -> AsyncIterator[bytes]:
        """The page as the API returns it, `{"offset", "limit", "total", "next_offset",
        "images"}` (or `"frames"`), its entries read from the file a chunk at a time."""
        head = {
            "offset": self.offset,
            "limit": limit,
            "total": self.total,
            "next_offset": self.next_offset,
        }
        yield _dumps(head)[:-1] + b"," + _dumps(self.key) + b":["
        async for chunk in self._entries():
            # JSON text holds no raw newline inside a value: each one separates two entries
            yield chunk.replace(b"\n", b",") if self.lines else chunk
        yield b"]}"

    async def _entries(self) -> AsyncIterator[bytes]:
        if self.inline:
            yield self.inline
        start, end = self.span
        if self.file is None or start == end:
            return
        async with await anyio.open_file(self.file, "rb") as file:
            await file.seek(start)
            remaining = end - start
            while remaining > 0:
                chunk = await file.read(min(_CHUNK_BYTES, remaining))
                if not chunk:
                    raise RuntimeError(f"{self.file} is shorter than its index says")
                remaining -= len(chunk)
                yield chunk


def read_page(
    result: Path, index: Path, offset: int, limit: int, *, lines: bool = False
) -> EntryPage:
    """Entries `offset .. offset + limit - 1` of the result file (with `lines`, of an
    `EntryLog`'s frames), located through its index. Blocking; reads only the page's part of
    the index."""
    key = FRAMES_KEY if lines else ENTRIES_KEY
    try:
        with index.open("rb") as file:
            total = file.seek(0, 2) // _SPAN.size
            count = max(0, min(limit, total - offset))
            if count == 0:
                return EntryPage(total, offset, 0, key=key)
            file.seek(offset * _SPAN.size)
            spans = file.read(count * _SPAN.size)
    except FileNotFoundError:
        if lines:
            raise
        return page_of(result.read_bytes(), offset, limit)
    first, _ = _SPAN.unpack_from(spans, 0)
    _, last = _SPAN.unpack_from(spans, len(spans) - _SPAN.size)
    return EntryPage(total, offset, count, result, (first, last), key=key, lines=lines)


def page_of(body: bytes, offset: int, limit: int) -> EntryPage:
    """A page of a result read whole: one kept with its job (small), a result file without an
    index (training: no entries, small), or one written before the index existed."""
    detail = orjson.loads(body)
    entries = detail.get(ENTRIES_KEY) if isinstance(detail, dict) else None
    if not isinstance(entries, list):
        entries = []
    page = entries[offset : offset + limit]
    inline = b",".join(_dumps(entry) for entry in page)
    return EntryPage(len(entries), offset, len(page), inline=inline)


class _BoundedWriter:
    def __init__(self, file: BinaryIO, max_bytes: int) -> None:
        self._file = file
        self._max_bytes = max_bytes
        self.written = 0

    def write(self, data: bytes) -> None:
        if self.written + len(data) > self._max_bytes:
            raise ResultTooLarge(self._max_bytes)
        self._file.write(data)
        self.written += len(data)
