"""Hostile files, made cheaply: image headers that promise more pixels than the bytes suggest."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path


def png_bomb(path: Path, width: int, height: int) -> Path:
    """A valid 1-bit grayscale PNG of `width` x `height` zeros: 30000 x 30000 is about 110 KB on
    disk and 2.7 GB once decoded as BGR (OpenCV's IMREAD_COLOR)."""
    row = b"\x00" * (1 + (width + 7) // 8)  # filter byte, then 8 pixels a byte
    packer = zlib.compressobj(9)
    data = b"".join(packer.compress(row) for _ in range(height)) + packer.flush()
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", data)
        + _chunk(b"IEND", b"")
    )
    return path


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
