"""One server per data directory: two servers on one database would both run every job."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from yolo_orch.errors import InstanceLocked

LOCK_FILE = "yolo-orch.lock"


class InstanceLock:
    """An exclusive `flock` on `{data_dir}/yolo-orch.lock`, released by the kernel when the
    process dies, so a crash never leaves a stale lock behind."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise InstanceLocked(
                f"another yolo-orch server (pid {holder}) is using {self.path.parent.resolve()}; "
                "stop it or give this one another data_dir"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
