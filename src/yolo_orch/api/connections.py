"""Client connections as a bounded resource with a reserve.

Each open connection holds a file descriptor, and so do the store, job logs, artifacts, model
files and the runners. Left unbounded, a flood of idle sockets, held waits or stalled bodies
takes the descriptors the rest of the process needs (a job fails `Too many open files`, the
database cannot fsync its log). So connections have a cap below the process's descriptor limit
(`connection_limit`), and at the cap a new connection takes the place of the one that has been
quiet longest and can give it up (`ConnectionBook`): a keep-alive connection between requests;
a connection, head or body from which nothing has arrived for `QUIET_S`; a held `Prefer: wait`
(answered with the job as it is) or an event stream (ended after a whole event). Requests the
app is working on are never shed. When none can be shed, a few more connections are let in
pending: once its request has arrived, each takes the place of one that can be shed by then,
or else is answered only if it is a probe (`/healthz`, `/readyz`: 503 otherwise). Past
those, a new connection gets a 503 before anything is read.
"""

from __future__ import annotations

import enum
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

import anyio
from starlette.types import Scope

from yolo_orch.ops.stop_signal import StopSignal

SHED_EXTENSION = "yolo_orch.shed"
"""The scope extension holding a request's `StopSignal`: set when its connection is shed."""
PROBE_PATHS = frozenset({"/healthz", "/readyz"})
"""What a connection on probation may ask for."""
PENDING_CONNECTIONS = 32
"""Connections let in past the cap when none can be shed: each may take the place of one that
can be by the time its request has arrived, else it is answered only if it is a probe."""
LEAVING_CONNECTIONS = 64
"""Connections shed and not closed yet (a held request answers first) at most: places are taken
from them only while fewer are leaving."""
PENDING_HEAD_TIMEOUT_S = 2.0
"""How long a pending connection has to send its request line and headers."""
QUIET_S = 1.0
"""A new connection, a head or a body from which nothing has arrived this long may be shed."""
RESERVE_SHARE = 4
"""By default a quarter of the descriptor limit is kept from client connections ..."""
MIN_RESERVE = 256
"""... and at least this many descriptors."""
MIN_CONNECTIONS = 16


def connection_limit(fd_limit: int, configured: int | None) -> int:
    """The cap on client connections: `configured`, else what the descriptor limit leaves once
    its reserve is kept."""
    if configured is not None:
        return configured
    reserve = max(fd_limit // RESERVE_SHARE, MIN_RESERVE)
    return max(fd_limit - reserve - PENDING_CONNECTIONS - LEAVING_CONNECTIONS, MIN_CONNECTIONS)


class Connection(Protocol):
    def sheddable(self, now: float, pressed: bool) -> bool:
        """Whether it may give up its place: it is quiet, or only waiting for the server.
        `pressed`: a connection that has sent nothing yet (or only part of a head) need not
        have been quiet for `QUIET_S`."""

    def shed(self) -> None:
        """Close it (a held request answers first)."""


class Admission(enum.Enum):
    ADMITTED = "admitted"
    PENDING = "pending"
    """Past the cap, none to shed yet: its request decides (`settle`)."""
    REFUSED = "refused"
    """No place: answered with a 503 (or, its request read, a probe's answer), then closed."""


class ConnectionBook:
    """The server's open client connections, least recently active first; and the requests
    among them that hold their answer for the server, at most `max_held` (`Hold`)."""

    def __init__(
        self, limit: int, max_held: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limit = limit
        self.max_held = max_held
        self._clock = clock
        self._held: OrderedDict[Hold, None] = OrderedDict()
        """Oldest first."""
        self._open: OrderedDict[Connection, None] = OrderedDict()
        self._leaving: set[Connection] = set()
        """Shed, and not closed yet: their places are taken, their descriptors not yet free."""
        self._pending = 0
        self.shed_total = 0
        self.refused_total = 0

    @property
    def open_count(self) -> int:
        return len(self._open) + len(self._leaving) + self._pending

    def admit(self, connection: Connection) -> Admission:
        """A new connection's place. While pending ones are few it gets none from a connection
        that has just opened too (that one's request may be on its way): it waits to show its
        request; once they are many, it does."""
        if self._take_place(connection, pressed=self._pending >= PENDING_CONNECTIONS):
            return Admission.ADMITTED
        if self._pending < PENDING_CONNECTIONS:
            self._pending += 1
            return Admission.PENDING
        self.refused_total += 1
        return Admission.REFUSED

    def settle(self, connection: Connection) -> bool:
        """Whether a pending connection, its request head read, gets a place now (it leaves
        the pending ones either way): a request in hand outranks a connection that has sent
        none yet."""
        self._pending -= 1
        if self._take_place(connection, pressed=True):
            return True
        self.refused_total += 1
        return False

    def _take_place(self, connection: Connection, pressed: bool) -> bool:
        if len(self._open) >= self.limit:
            if len(self._leaving) >= LEAVING_CONNECTIONS:
                return False  # their descriptors are not free yet: no more may be taken
            victim = self._quietest_sheddable(pressed)
            if victim is None:
                return False
            del self._open[victim]
            self._leaving.add(victim)
            self.shed_total += 1
            victim.shed()
        self._open[connection] = None
        return True

    def hold(self, hold: Hold) -> None:
        """A request begins to hold its answer; past `max_held`, the oldest held one is
        answered now (each costs a task and its request's memory, whatever the descriptors)."""
        self._held[hold] = None
        if len(self._held) > self.max_held:
            oldest, _ = self._held.popitem(last=False)
            self.shed_total += 1
            oldest.set()

    def release(self, hold: Hold) -> None:
        self._held.pop(hold, None)

    def touch(self, connection: Connection) -> None:
        """It did something: it goes last in the shedding order."""
        if connection in self._open:
            self._open.move_to_end(connection)

    def closed(self, connection: Connection, admission: Admission) -> None:
        if admission is Admission.PENDING:
            self._pending -= 1
        elif admission is Admission.ADMITTED:
            self._open.pop(connection, None)
            self._leaving.discard(connection)

    def _quietest_sheddable(self, pressed: bool) -> Connection | None:
        now = self._clock()
        for connection in self._open:  # least recently active first
            if connection.sheddable(now, pressed):
                return connection
        return None


class Hold(StopSignal):
    """A request's signal that its connection was shed (or that too many requests hold their
    answer): what the request holds open registers here while it waits, as with the server's
    stop signal."""

    def __init__(self, book: ConnectionBook) -> None:
        super().__init__()
        self._book = book

    @contextmanager
    def interrupting(self, scope: anyio.CancelScope) -> Iterator[None]:
        self._book.hold(self)
        try:
            with super().interrupting(scope):
                yield
        finally:
            self._book.release(self)


@contextmanager
def released_if_shed(scope: Scope) -> Iterator[anyio.CancelScope]:
    """While in this block, shedding the request's connection cancels the block's scope (the
    request holds its answer for the server: a wait, a stream). Without a connection book (an
    app driven in-process) the scope is never cancelled."""
    shed: StopSignal | None = scope.get("extensions", {}).get(SHED_EXTENSION)
    with anyio.CancelScope() as held:
        if shed is None:
            yield held
        else:
            with shed.interrupting(held):
                yield held
