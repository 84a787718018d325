"""The server's one "stopping now" signal, for what it holds open for clients."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import anyio


class StopSignal:
    """Set once, when the server stops serving: its drain has ended, the jobs still running left
    for the next start. What is held open for a client (a `Prefer: wait`, an event stream)
    registers its cancel scope here while it waits, and the one `set` cancels them all at once
    (no polling, no task per waiter), so each can answer as things are now, before uvicorn's
    graceful-shutdown timeout would cut it off."""

    def __init__(self) -> None:
        self._scopes: set[anyio.CancelScope] = set()
        self._set = False

    def is_set(self) -> bool:
        return self._set

    @property
    def holding(self) -> bool:
        """Whether something waits on it now."""
        return bool(self._scopes)

    def set(self) -> None:
        self._set = True
        scopes, self._scopes = self._scopes, set()
        for scope in scopes:
            scope.cancel()

    @contextmanager
    def interrupting(self, scope: anyio.CancelScope) -> Iterator[None]:
        """While in this block, the stop cancels `scope` (at once when it came already)."""
        if self._set:
            scope.cancel()
            yield
            return
        self._scopes.add(scope)
        try:
            yield
        finally:
            self._scopes.discard(scope)
