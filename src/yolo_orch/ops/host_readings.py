"""The host's own readings, for hosts without NVML too: CPU busy share, memory and disk use, and
the load average, read from /proc and `statvfs` (no psutil). Where one cannot be read (not Linux,
a container without /proc), it is None."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

_PROC_STAT = Path("/proc/stat")
_PROC_MEMINFO = Path("/proc/meminfo")


class HostReadings:
    def __init__(self, disk_path: Path) -> None:
        """`disk_path`: the disk whose use is read (the server's data directory)."""
        self._disk_path = disk_path
        self._last_cpu: tuple[int, int] | None = None

    def read(self) -> dict[str, float | None]:
        """Blocking but quick: a few small files."""
        return {
            "cpu_percent": self._cpu_percent(),
            "memory_percent": _memory_percent(),
            "disk_percent": self._disk_percent(),
            "load_1m": _load_1m(),
        }

    def _cpu_percent(self) -> float | None:
        """The share of CPU time not idle since the last reading (None the first time)."""
        try:
            fields = [int(v) for v in _PROC_STAT.read_text().split("\n", 1)[0].split()[1:]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        total = sum(fields[:8])  # guest time is already in user and nice
        last, self._last_cpu = self._last_cpu, (idle, total)
        if last is None or total <= last[1]:
            return None
        return round(100.0 * (1 - (idle - last[0]) / (total - last[1])), 1)

    def _disk_percent(self) -> float | None:
        try:
            usage = shutil.disk_usage(self._disk_path)
        except OSError:
            return None
        return round(100.0 * usage.used / usage.total, 1) if usage.total else None


def _memory_percent() -> float | None:
    try:
        info = dict(line.split(":", 1) for line in _PROC_MEMINFO.read_text().splitlines())
        total = int(info["MemTotal"].split()[0])
        available = int(info["MemAvailable"].split()[0])
    except (OSError, KeyError, ValueError):
        return None
    return round(100.0 * (total - available) / total, 1) if total else None


def _load_1m() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None
