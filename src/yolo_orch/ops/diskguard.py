"""Free space where the server stores what it is sent: below `min_free_bytes`, submissions and
uploads are refused (507) before anything is written, and readiness says degraded.

The places are `data_dir` (job files), the database's folder and `models_dir`, each checked on
its own since any may be a mount of its own. The probe is passed in, so tests can say how full
a disk is without filling one.

A submission reads the answer of the last look (`require`, no I/O): a refresher looks every
`disk_check_interval_s` in a thread, and readiness looks afresh each time it is asked.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

import anyio.to_thread

from yolo_orch.errors import InsufficientStorage

FreeSpace = Callable[[Path], int]
"""Bytes an unprivileged writer may still use on the file system holding the path."""


def statvfs_free(path: Path) -> int:
    """`statvfs`'s `f_bavail * f_frsize`, of the nearest folder that exists."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free


class DiskGuard:
    def __init__(
        self,
        places: Mapping[str, Path],
        min_free_bytes: int,
        probe: FreeSpace = statvfs_free,
    ) -> None:
        """`places`: what each place is called in messages (never its path: clients see them)
        and where it is; one folder named twice is checked once."""
        seen: dict[Path, str] = {}
        for name, path in places.items():
            seen.setdefault(path.resolve(), name)
        self._places = [(name, path) for path, name in seen.items()]
        self._min_free = min_free_bytes
        self._probe = probe
        self._low: list[str] = []
        """What the last look found short."""

    def short(self) -> list[str]:
        """The places below `min_free_bytes` (a place that cannot be read counts as one).
        Blocking."""
        if self._min_free <= 0:
            return []
        low = []
        for name, path in self._places:
            try:
                free = self._probe(path)
            except OSError:
                free = 0
            if free < self._min_free:
                low.append(f"{name}: {free} bytes free")
        return low

    async def check(self) -> list[str]:
        """Look now (in a thread); what submissions see from then on."""
        self._low = await anyio.to_thread.run_sync(self.short)
        return self._low

    async def run(self, interval_s: float) -> None:
        """Look every `interval_s`, until cancelled."""
        while True:
            await self.check()
            await asyncio.sleep(interval_s)

    def require(self) -> None:
        """Raise `InsufficientStorage` if the last look found a place short of space."""
        if self._low:
            raise InsufficientStorage(self._low)
