"""The active head's lease on a PostgreSQL database, and the fence on every write of the heads.

Two or more servers (heads) share one database; one is active and runs the jobs. Being active
takes two things, both checked by the database, never by a clock of a head's own:

- a session advisory lock (`LEASE_KEY`), held on the active's own lease connection: when the
  active's process dies its session ends and PostgreSQL lets the lock go at once, so a standby
  polling for it takes over within one poll;
- the `head_lease` row, renewed by the active: `expires_at_s` (the database's clock) a lease
  timeout ahead. A head that is lost without its session ending (host gone, process hung, the
  network cut) stops renewing; once the row has expired a standby ends the holder's sessions
  (`pg_terminate_backend`) and the lock is free.

Fencing: each takeover raises `epoch`, and the active's every write transaction begins by
reading the row `FOR SHARE` and checking that the epoch is still its own (`fence`). A takeover's
UPDATE waits for a write transaction of the old active that is under way, and every one after
it fails (`NotActiveHead`): an old active that comes back from a pause writes nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from sqlalchemy import Engine, Table, create_engine, text
from sqlalchemy.engine import Connection
from sqlalchemy.pool import NullPool
from sqlmodel import Field, SQLModel

from yolo_orch.errors import NotActiveHead
from yolo_orch.store.postgres_db import PostgresDatabase, postgres_url
from yolo_orch.store.tables import WIDE_INTEGER

_T = TypeVar("_T")

LEASE_KEY = 0x796F6C6F
"""The advisory lock's key ("yolo"); one lease per database."""


class HeadLeaseRow(SQLModel, table=True):
    __tablename__ = "head_lease"

    id: int = Field(primary_key=True)
    """Always 1: one row."""
    epoch: int = Field(sa_type=WIDE_INTEGER)
    """Raised by each takeover: the fencing token."""
    holder: str
    """The active head's name (host and process), for people and logs."""
    url: str
    """Where the standbys send clients (`head_url`)."""
    lease_pid: int
    """The database session that holds the advisory lock."""
    writer_pid: int
    """The active's write session: ended with the lease session when the lease expired."""
    expires_at_s: float
    """The database's clock (seconds since the epoch) when the lease ends unless renewed."""


HEAD_LEASE: Table = HeadLeaseRow.metadata.tables["head_lease"]


@dataclass(frozen=True)
class Holder:
    """Who holds the lease, as a standby reads it."""

    epoch: int
    holder: str
    url: str
    live: bool
    """False once the lease has expired (its holder stopped renewing)."""


_NOW = "extract(epoch from clock_timestamp())"


def take_lease(
    conn: Connection, holder: str, url: str, writer_pid: int, timeout_s: float
) -> int | None:
    """On the lease connection (autocommit): the new epoch if this head is active now, else None.
    A lease expired under a holder whose sessions live on gets them ended, for the next try."""
    if not conn.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": LEASE_KEY}).scalar():
        expired = conn.execute(
            text(
                f"SELECT lease_pid, writer_pid FROM head_lease WHERE id = 1 "
                f"AND expires_at_s < {_NOW}"
            )
        ).first()
        if expired is not None:
            for pid in expired:
                conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        return None
    epoch: int = conn.execute(
        text(
            "INSERT INTO head_lease (id, epoch, holder, url, lease_pid, writer_pid, expires_at_s) "
            f"VALUES (1, 1, :holder, :url, pg_backend_pid(), :writer_pid, {_NOW} + :timeout_s) "
            "ON CONFLICT (id) DO UPDATE SET epoch = head_lease.epoch + 1, "
            "holder = excluded.holder, url = excluded.url, lease_pid = excluded.lease_pid, "
            "writer_pid = excluded.writer_pid, expires_at_s = excluded.expires_at_s "
            "RETURNING epoch"
        ),
        {"holder": holder, "url": url, "writer_pid": writer_pid, "timeout_s": timeout_s},
    ).scalar_one()
    return epoch


def renew_lease(conn: Connection, epoch: int, timeout_s: float) -> bool:
    """Push the lease's end a timeout ahead; False if the lease is no longer this epoch's."""
    renewed = conn.execute(
        text(
            f"UPDATE head_lease SET expires_at_s = {_NOW} + :timeout_s "
            "WHERE id = 1 AND epoch = :epoch"
        ),
        {"epoch": epoch, "timeout_s": timeout_s},
    )
    return renewed.rowcount == 1


def read_holder(conn: Connection) -> Holder | None:
    row = conn.execute(
        text(f"SELECT epoch, holder, url, expires_at_s >= {_NOW} FROM head_lease WHERE id = 1")
    ).first()
    return None if row is None else Holder(row[0], row[1], row[2], bool(row[3]))


@dataclass(frozen=True)
class Fence:
    """The first statement of each write transaction of a head: `epoch` None on a standby
    (which writes nothing), the epoch it took over with on the active."""

    epoch: int | None

    def __call__(self, conn: Connection) -> None:
        if self.epoch is None:
            raise NotActiveHead("this head is a standby: it writes nothing")
        current = conn.execute(
            text("SELECT epoch FROM head_lease WHERE id = 1 FOR SHARE")
        ).scalar_one_or_none()
        if current != self.epoch:
            raise NotActiveHead(
                f"this head's lease (epoch {self.epoch}) has passed to another head "
                f"(epoch {current}): it writes nothing more"
            )


class HeadLease:
    """The lease connection of one head (autocommit: each statement commits at once), on a
    thread of its own; reconnected after an error. Sets the fence of `database`'s writes."""

    def __init__(self, database_url: str, database: PostgresDatabase) -> None:
        self._url = postgres_url(database_url)
        self._database = database
        self._engine: Engine | None = None
        self._conn: Connection | None = None
        self._thread = anyio.CapacityLimiter(1)

    def fence(self, epoch: int | None) -> None:
        """From now on every write of the database checks `epoch` (None: refuses)."""
        self._database.fence = Fence(epoch)

    async def try_take(self, holder: str, url: str, timeout_s: float) -> int | None:
        writer_pid = self._database.writer_pid
        return await self._run(take_lease, holder, url, writer_pid, timeout_s)

    async def renew(self, epoch: int, timeout_s: float) -> bool:
        """After a lost connection the advisory lock went with the session: taken again first,
        unless a standby has it by now (then the lease is lost)."""
        reconnected = self._conn is None
        return await self._run(_renew, epoch, timeout_s, reconnected)

    async def active_url(self) -> str | None:
        """The active head's URL, None while no lease is live."""
        holder = await self._run(read_holder)
        return holder.url if holder is not None and holder.live else None

    async def close(self) -> None:
        if self._conn is not None:
            await self._on_thread(self._conn.close)
        if self._engine is not None:
            await anyio.to_thread.run_sync(self._engine.dispose)
        self._conn = self._engine = None

    async def _run(self, op: Callable[..., _T], *args: Any) -> _T:
        return await self._on_thread(self._run_sync, op, *args)

    def _run_sync(self, op: Callable[..., _T], *args: Any) -> _T:
        if self._conn is None:
            if self._engine is None:
                self._engine = create_engine(
                    self._url,
                    poolclass=NullPool,
                    isolation_level="AUTOCOMMIT",
                    connect_args={"application_name": "yolo-orch lease", "connect_timeout": 2},
                )
            self._conn = self._engine.connect()
        try:
            return op(self._conn, *args)
        except Exception:
            conn, self._conn = self._conn, None  # a new session next time
            with contextlib.suppress(Exception):
                conn.close()
            raise

    async def _on_thread(self, work: Callable[..., _T], *args: Any) -> _T:
        return await anyio.to_thread.run_sync(work, *args, limiter=self._thread)


def _renew(conn: Connection, epoch: int, timeout_s: float, relock: bool) -> bool:
    if (
        relock
        and not conn.execute(text("SELECT pg_try_advisory_lock(:key)"), {"key": LEASE_KEY}).scalar()
    ):
        return False
    return renew_lease(conn, epoch, timeout_s)
