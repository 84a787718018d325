"""One server per data directory and per database: two servers on one database would both run
every job."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Sequence
from pathlib import Path

from yolo_orch.errors import InstanceLocked


class InstanceLock:
    """Exclusive `flock`s on the given lock files (the data directory's, and the database's when
    it lives elsewhere), released by the kernel when the process dies, so a crash never leaves
    a stale lock behind. All or none."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = list(paths)
        self._fds: list[int] = []

    def acquire(self) -> None:
        try:
            for path in self.paths:
                self._fds.append(_lock(path))
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        while self._fds:
            fd = self._fds.pop()
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def _lock(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise InstanceLocked(
            f"another yolo-orch server (pid {holder}) is using {path.parent.resolve()} "
            f"({path.name}); stop it or give this one another data_dir and database"
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd
