"""Hostile inputs made cheaply, and a measure of how much memory a process spends on them."""

from __future__ import annotations

import struct
import threading
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


def rss_bytes(pid: int) -> int:
    """The process's resident set size now (VmRSS)."""
    return _status_kb(pid, "VmRSS") * 1024


class PeakRss:
    """How far a process's resident set rose above where it was, while the block ran.

    The kernel's own peak (VmHWM, reset on entry through `/proc/<pid>/clear_refs` where that
    can be written) catches a spike however short; sampling VmRSS every few milliseconds in a
    thread covers systems where it cannot be reset. `growth` is the higher of the two, in bytes.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.baseline = 0
        self.growth = 0
        self._sampled = 0
        self._hwm_reset = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> PeakRss:
        self.baseline = rss_bytes(self.pid)
        try:
            Path(f"/proc/{self.pid}/clear_refs").write_text("5")
            self._hwm_reset = True
        except OSError:
            pass
        self._sampled = self.baseline
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        peak = max(self._sampled, rss_bytes(self.pid))
        if self._hwm_reset:
            peak = max(peak, _status_kb(self.pid, "VmHWM") * 1024)
        self.growth = peak - self.baseline

    @property
    def growth_mb(self) -> float:
        return self.growth / 2**20

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self._sampled = max(self._sampled, rss_bytes(self.pid))


def _status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise LookupError(f"/proc/{pid}/status has no {field}")
