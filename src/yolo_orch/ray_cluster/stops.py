"""The stops asked of runs on the cluster: one timer looks at every running job's stop flag (set by
a cancel, a time limit or the watchdog, from any thread) and starts the stop of each job whose
flag is up, once. One timer for all runs, not one per run, so a large cluster's runs cost the
event loop no more wake-ups than one."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

Stop = Callable[[], Coroutine[Any, Any, None]]


class Stops:
    def __init__(self, interval_s: float) -> None:
        self._interval_s = interval_s
        self._watched: dict[int, tuple[Callable[[], bool], Stop]] = {}
        self._stopping: dict[int, asyncio.Task[None]] = {}
        self._keys = itertools.count()
        self._timer: asyncio.Task[None] | None = None

    @contextlib.contextmanager
    def watching(self, asked: Callable[[], bool], stop: Stop) -> Iterator[None]:
        """While in the block: `stop()` runs, as a task, within `interval_s` of `asked()`
        turning true; leaving the block (the run ended) cancels a stop still under way."""
        key = next(self._keys)
        self._watched[key] = (asked, stop)
        if self._timer is None or self._timer.done():
            self._timer = asyncio.create_task(self._look(), name="ray run stops")
        try:
            yield
        finally:
            self._watched.pop(key, None)
            if (stopping := self._stopping.pop(key, None)) is not None:
                stopping.cancel()

    async def _look(self) -> None:
        while self._watched:
            await asyncio.sleep(self._interval_s)
            for key, (asked, stop) in list(self._watched.items()):
                if asked():
                    del self._watched[key]
                    self._stopping[key] = asyncio.create_task(stop())
