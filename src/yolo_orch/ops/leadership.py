"""Which head of several on one PostgreSQL database is active: the lease (`store/head_lease.py`)
taken, renewed and lost, and the head's role as the API and `/readyz` read it.

A standby polls for the lease; once it has it, it starts what only the active runs (recovery
of the jobs the last active left running, the dispatcher, retention, webhook deliveries) and
renews the lease a quarter of its timeout at a time. An active that learns the lease has passed
to another head, or has not renewed it for a whole timeout (the database unreachable), is lost:
`lost` is set, and the server exits (`cli.py`), so that its supervisor starts it again as a
standby. Its writes are fenced meanwhile: it commits nothing once another head is active."""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

log = logging.getLogger(__name__)


class Role(enum.StrEnum):
    STANDBY = "standby"
    """Serves reads; sends writes to the active head (307), or answers 503 while none is known."""
    ACTIVE = "active"
    LOST = "lost"
    """Was active and is no longer: exits."""


class Lease(Protocol):
    def fence(self, epoch: int | None) -> None: ...

    async def try_take(self, holder: str, url: str, timeout_s: float) -> int | None: ...

    async def renew(self, epoch: int, timeout_s: float) -> bool: ...

    async def active_url(self) -> str | None: ...


class Leadership:
    """One head's part in the election; `run` is its task for the server's life."""

    def __init__(
        self,
        lease: Lease,
        *,
        name: str,
        url: str,
        timeout_s: float,
        on_active: Callable[[], Awaitable[None]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lease = lease
        self.name = name
        self.url = url
        self._timeout_s = timeout_s
        self._poll_s = min(0.25, timeout_s / 20)
        self._on_active = on_active
        self._clock = clock
        self.role = Role.STANDBY
        self.epoch: int | None = None
        self.active_url: str | None = None
        """Where writes go: this head's own URL once active; the active's, as last read, on a
        standby (None while no live lease is known)."""
        self.lost = asyncio.Event()
        self._started = asyncio.Event()

    async def start(self) -> None:
        """One try, at start-up: a head that finds no other active becomes active before it
        serves (its start fails if that does)."""
        self._lease.fence(None)  # a standby writes nothing
        try:
            epoch = await self._lease.try_take(self.name, self.url, self._timeout_s)
            if epoch is None:
                self.active_url = await self._lease.active_url()
        except Exception as exc:
            log.warning("head %s cannot read the lease yet: %s", self.name, exc)
            epoch = None
        try:
            if epoch is not None:
                await self._activate(epoch)
        finally:
            self._started.set()

    async def run(self) -> None:
        """The head's task: once `start` has ended, stand by until the lease is free, then
        hold it."""
        await self._started.wait()
        if self.role is Role.STANDBY:
            epoch = await self._stand_by()
            try:
                await self._activate(epoch)
            except Exception:
                log.exception("head %s could not start as the active one", self.name)
                self._lose("its start as the active head failed")
                return
        if self.epoch is not None:
            await self._hold(self.epoch)

    async def _activate(self, epoch: int) -> None:
        """Writes are this head's from now on, but it is active (ready, taking requests) only
        once recovery has run: meanwhile requests that write get 503 and retry."""
        self._lease.fence(epoch)
        self.epoch, self.active_url = epoch, None
        log.warning("head %s holds the lease (epoch %d): recovering", self.name, epoch)
        await self._on_active()
        self.role, self.active_url = Role.ACTIVE, self.url
        log.warning("head %s is active", self.name)

    async def _stand_by(self) -> int:
        failing = False
        while True:
            try:
                epoch = await self._lease.try_take(self.name, self.url, self._timeout_s)
                if epoch is not None:
                    return epoch
                self.active_url = await self._lease.active_url()
                failing = False
            except Exception as exc:
                self.active_url = None
                if not failing:  # once per outage, not once per poll
                    log.warning("standby head %s cannot read the lease: %s", self.name, exc)
                failing = True
            await asyncio.sleep(self._poll_s)

    async def _hold(self, epoch: int) -> None:
        renewed_at = self._clock()
        while True:
            await asyncio.sleep(self._timeout_s / 4)
            try:
                if not await self._lease.renew(epoch, self._timeout_s):
                    self._lose("another head has taken the lease")
                    return
                renewed_at = self._clock()
            except Exception as exc:
                log.warning("active head %s could not renew its lease: %s", self.name, exc)
                if self._clock() - renewed_at >= self._timeout_s:
                    self._lose(f"its lease was not renewed for {self._timeout_s}s")
                    return

    def _lose(self, why: str) -> None:
        self.role, self.active_url = Role.LOST, None
        self._lease.fence(None)
        log.error("head %s is no longer active: %s; it stops", self.name, why)
        self.lost.set()
