"""The runs that began before their claims committed, so that such a run still has its attempt
counted if the server dies, and on a cluster is followed again.

A run starts while the dispatcher's claim of it (the write that counts its attempt and marks it
RUNNING) is still being committed: waiting for that write was the largest part of what a lane
lost between two short jobs. A job that kills the process in those few milliseconds would
otherwise be found QUEUED at the next start, its attempt not counted, and crash the server again
for ever. So one line per run is appended here before the run starts (by its worker thread, or
by the Ray executor before the run's task leaves for its node): an append that stays in the page
cache (it survives this process's crash, which is all it is for; a power loss takes the
uncommitted claim and the line together, and the job runs again, as a claim lost with it always
did). At the next start, `recovery` completes the claims of the jobs listed here that are still
QUEUED in the attempt the line names, and settles them like any run the crash interrupted: on a
cluster, a run its actor still holds is followed again through that claim.

Lines of runs whose claims have committed are stale: the dispatcher lets the file be emptied
(`trim`) whenever no claim is in flight, once it has grown past `TRIM_BYTES`.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from yolo_orch.domain import Job


class StartingRun(Protocol):
    """A run about to start (a runner's `RunContext`): its job, on these lanes."""

    @property
    def job(self) -> Job: ...

    @property
    def devices(self) -> tuple[str, ...]: ...


TRIM_BYTES = 16 * 1024
"""About 150 lines: what the next start may have to look up."""


@dataclass(frozen=True)
class Started:
    """A run as the journal recorded it: the attempt its claim counts, on these lanes."""

    job_id: str
    attempt: int
    devices: tuple[str, ...]


class StartJournal:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None
        self._lock = threading.Lock()

    def note(self, ctxs: Iterable[StartingRun]) -> None:
        """Before the runs start (in their worker thread, or on a cluster before their tasks
        leave): one append to an open file, not synced."""
        lines = "".join(
            json.dumps({"job": ctx.job.id, "attempt": ctx.job.attempt, "devices": ctx.devices})
            + "\n"
            for ctx in ctxs
        ).encode()
        with self._lock:
            if self._fd is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            fd = self._fd
        os.write(fd, lines)  # O_APPEND: lines of several threads never interleave

    def trim(self) -> None:
        """No claim is in flight: every line is stale. Empties the file once it is large."""
        with self._lock:
            if self._fd is not None and os.fstat(self._fd).st_size > TRIM_BYTES:
                os.ftruncate(self._fd, 0)

    def read(self) -> list[Started]:
        """At start-up, before any run: what the last process started (the journal stays
        until `clear`, so a crash before the claims it names are completed finds it again)."""
        try:
            text = self.path.read_bytes().decode(errors="replace")
        except FileNotFoundError:
            return []
        return [entry for line in text.splitlines() if (entry := _parse(line)) is not None]

    def clear(self) -> None:
        """At start-up, once the claims `read` named are completed."""
        with self._lock, contextlib.suppress(FileNotFoundError):
            os.truncate(self.path, 0)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def _parse(line: str) -> Started | None:
    """None for a line the crash cut short, or one this version did not write."""
    try:
        entry = json.loads(line)
        job_id, attempt, devices = entry["job"], entry["attempt"], entry["devices"]
    except (ValueError, KeyError, TypeError):
        return None
    if not (isinstance(job_id, str) and isinstance(attempt, int) and isinstance(devices, list)):
        return None
    return Started(job_id, attempt, tuple(str(device) for device in devices))
