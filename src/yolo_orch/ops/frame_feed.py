"""The live frames of running streams, from their runners' threads to the event streams that
follow them (`frame` events of GET /v1/jobs/{id}/events): the latest frame of each job, never a
backlog. A follower slower than the frames sees the newest one each time it looks."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from dataclasses import dataclass, field
from typing import Any

JsonObject = dict[str, Any]


@dataclass
class _Latest:
    number: int = 0
    frame: JsonObject | None = None
    waiters: set[asyncio.Event] = field(default_factory=set)


class FrameFeed:
    """Thread-safe publishing (`publish`, from any thread); waiting (`next`) on the event loop
    the feed was made on."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._jobs: dict[str, _Latest] = {}

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop followers wait on (the server's, once it runs)."""
        self._loop = loop

    def publish(self, job_id: str, frame: JsonObject) -> None:
        with self._lock:
            latest = self._jobs.setdefault(job_id, _Latest())
            latest.number += 1
            latest.frame = frame
            waiters = list(latest.waiters)
        loop = self._loop
        if loop is not None and waiters:
            for waiter in waiters:
                with contextlib.suppress(RuntimeError):  # the loop is closing
                    loop.call_soon_threadsafe(waiter.set)

    def forget(self, job_id: str) -> None:
        """The job's run ended: its frames are in its segments."""
        with self._lock:
            latest = self._jobs.pop(job_id, None)
            waiters = list(latest.waiters) if latest is not None else []
        if self._loop is not None:
            for waiter in waiters:  # a copy: a waiter leaves the set on the loop meanwhile
                with contextlib.suppress(RuntimeError):
                    self._loop.call_soon_threadsafe(waiter.set)

    def latest(self, job_id: str) -> tuple[int, JsonObject | None]:
        with self._lock:
            latest = self._jobs.get(job_id)
            return (0, None) if latest is None else (latest.number, latest.frame)

    async def next(self, job_id: str, seen: int) -> tuple[int, JsonObject | None]:
        """The job's frame after the `seen`th, once there is one (or the run ended: then its
        number is `seen` and the frame None). On the loop the feed is bound to."""
        waiter = asyncio.Event()
        with self._lock:
            latest = self._jobs.setdefault(job_id, _Latest())
            if latest.number > seen:
                return latest.number, latest.frame
            latest.waiters.add(waiter)
        try:
            await waiter.wait()
        finally:
            with self._lock:
                latest.waiters.discard(waiter)
                if latest.frame is None and not latest.waiters:  # nothing was ever published
                    self._jobs.pop(job_id, None)
        return self.latest(job_id) if job_id in self._jobs else (seen, None)
