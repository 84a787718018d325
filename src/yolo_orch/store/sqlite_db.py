"""The database under the durable stores: SQLite in WAL mode, every acknowledged write fsynced,
through SQLAlchemy Core on the standard `sqlite3` driver, in threads of its own. The
writer, its group commit and the pooled reads are `database.Database`'s; here is what is
SQLite's: how connections are made, `BEGIN IMMEDIATE`, and when a commit is durable.

Writes: SQLite allows one writer at a time, and a durable commit waits for an fsync of the
write-ahead log, so a batch is one `BEGIN IMMEDIATE`, one `COMMIT`. `BEGIN IMMEDIATE` takes
SQLite's write lock before any read, so a read-then-write is never refused half way with
"database is locked"; `busy_timeout` covers a writer in another process (a migration, a tool).

Durability: what `synchronous=FULL` gives, with the fsync moved off the writer's path. The
write connection commits with `synchronous=NORMAL` (in WAL mode: the log is written, not yet
synced, and SQLite still syncs it before every checkpoint), and a sync task of ours then
fdatasyncs the log on a thread of its own, while the writer commits the next batch. A caller is
answered only after a sync that started once its batch had committed, so an acknowledged write
is on disk, as with FULL; the log is sequential, so that sync covers every earlier commit too.
The difference: the next batch no longer waits for the previous one's fsync. Two kinds of write
are answered at their commit, before the sync (`answer_before_fsync`): the dispatcher's claims
and progress. They survive a crash of this process at once (the log is in the OS's page cache)
and a power loss once the sync that follows at once has ended; what they cost if lost in
between is one job run again from the queue with its attempt not counted, and nothing a client
was told. A reader may likewise see a commit a few milliseconds before its fsync.

Reads run in deferred transactions on pooled read connections; thanks to WAL they never
wait for the writer. Why threads and not aiosqlite: see `database.py` (a batch of N creates
was 3N + 2 round trips on the event loop through aiosqlite).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

import anyio
import anyio.to_thread
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.pool import NullPool, QueuePool

from yolo_orch.store.database import READ_THREADS, Database, QueuedWrite, answer

log = logging.getLogger(__name__)

_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=FULL",
    "PRAGMA busy_timeout=5000",
    "PRAGMA foreign_keys=ON",
)

_FDATASYNC = getattr(os, "fdatasync", os.fsync)
"""fdatasync where the platform has it (what SQLite uses on Linux), else fsync."""
_BEGIN_MODE = "yolo_orch_begin_mode"
"""Execution option read by `_begin`: "IMMEDIATE" for writes, else a deferred BEGIN."""


def sync_url(url: str) -> str:
    """`sqlite+aiosqlite:///x` -> `sqlite:///x`: the same database through the standard driver,
    which the stores and Alembic use (the configured URL keeps its historical driver name)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        raise ValueError(f"not a SQLite database URL: {parsed!r}")
    return parsed.set(drivername="sqlite").render_as_string(hide_password=False)


def _on_connect(dbapi_connection: Any, _record: Any) -> None:
    # isolation_level=None stops the sqlite3 driver from issuing its own BEGIN, so that
    # `_begin` alone decides how each transaction starts (SQLAlchemy's documented recipe, which
    # also makes SAVEPOINT work).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    for pragma in _PRAGMAS:
        cursor.execute(pragma)
    cursor.close()


def _begin(conn: Connection) -> None:
    mode = conn.get_execution_options().get(_BEGIN_MODE, "DEFERRED")
    conn.exec_driver_sql(f"BEGIN {mode}")


class SQLiteDatabase(Database):
    """`Database` on a SQLite file, with the sync task that makes its commits durable."""

    def __init__(self, database_url: str) -> None:
        super().__init__()
        self._url = sync_url(database_url)
        self._wal = _wal_path(self._url)
        """The write-ahead log our sync task fdatasyncs; None for a database without a file or
        not in WAL mode, which then commits with `synchronous=FULL`."""
        self._unsynced: list[QueuedWrite[Any]] = []
        """Committed writes whose callers wait for the next sync."""
        self._sync_wanted = False
        self._syncer: asyncio.Task[None] | None = None
        self._sync_thread = anyio.CapacityLimiter(1)

    @property
    def dialect(self) -> str:
        return "sqlite"

    async def open(self) -> None:
        # Connections move between worker threads (one thread uses one at a time).
        shared = {"check_same_thread": False}
        self._reader_engine = _engine(
            create_engine(
                self._url, poolclass=QueuePool, pool_size=READ_THREADS, connect_args=shared
            )
        )
        self._writer_engine = _engine(
            create_engine(self._url, poolclass=NullPool, connect_args=shared)
        )
        writer = self._writer_engine.execution_options(**{_BEGIN_MODE: "IMMEDIATE"})
        self._conn = await self._on_writer(writer.connect)
        if self._wal is not None and not await self._on_writer(_commit_without_fsync, self._conn):
            self._wal = None

    async def _writes_answered(self) -> None:
        while self._syncer is not None:  # every write waiting for its fsync
            syncer = self._syncer
            try:
                await asyncio.shield(syncer)
            except asyncio.CancelledError:
                if not syncer.done():  # close() itself was cancelled
                    raise

    async def check_writable(self) -> None:
        """Take SQLite's write lock and commit nothing: fails on a read-only or locked database."""
        await self.write(lambda conn: None)

    def _committed(self, batch: list[QueuedWrite[Any]]) -> None:
        """Answer the writes of a committed batch that need no fsync (refused ones wrote
        nothing); the rest wait for the next sync."""
        for write in batch:
            if write.future.done():  # its caller was cancelled
                continue
            if write.error is not None or write.answer_before_fsync or self._wal is None:
                answer(write)
            else:
                self._unsynced.append(write)
        if self._wal is not None:
            self._sync_wanted = True
            if self._syncer is None:
                self._syncer = asyncio.create_task(self._sync_committed(self._wal))

    async def _sync_committed(self, wal: str) -> None:
        """The sync task: fdatasyncs the log while commits go on, and answers the writes that
        had committed before each sync began."""
        cancelled = False
        try:
            while self._sync_wanted:
                self._sync_wanted = False
                synced, self._unsynced = self._unsynced, []
                try:
                    await anyio.to_thread.run_sync(_sync, wal, limiter=self._sync_thread)
                except asyncio.CancelledError:  # at shutdown (the thread's sync has ended)
                    cancelled = True
                    self._unsynced[:0] = synced
                    raise
                except Exception as exc:  # not known to be on disk: nobody is told it is
                    log.critical("could not fsync the database's log %s", wal, exc_info=exc)
                    for write in synced:
                        if not write.future.done():
                            write.future.set_exception(exc)
                    continue
                for write in synced:
                    if not write.future.done():
                        write.future.set_result(write.result)
        finally:
            self._syncer = None
            if cancelled:
                for write in self._unsynced:
                    write.future.cancel()
                self._unsynced = []
            elif self._sync_wanted:
                self._syncer = asyncio.create_task(self._sync_committed(wal))


def _wal_path(url: str) -> str | None:
    database = make_url(url).database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return f"{os.path.abspath(database)}-wal"


def _commit_without_fsync(conn: Connection) -> bool:
    """The write connection's commits leave the fsync to `_sync`, if the database is in WAL
    mode (a file system without shared memory may refuse it): False, and FULL stays, if not."""
    dbapi_connection: Any = conn.connection.dbapi_connection
    (mode,) = dbapi_connection.execute("PRAGMA journal_mode").fetchone()
    if str(mode).lower() != "wal":
        return False
    dbapi_connection.execute("PRAGMA synchronous=NORMAL")
    return True


def _sync(wal: str) -> None:
    """fdatasync the log: through any descriptor, it writes out every page of the file."""
    try:
        fd = os.open(wal, os.O_RDONLY)
    except FileNotFoundError:  # checkpointed and removed: SQLite synced the database itself
        return
    try:
        _FDATASYNC(fd)
    finally:
        os.close(fd)


def _engine(engine: Engine) -> Engine:
    event.listen(engine, "connect", _on_connect)
    event.listen(engine, "begin", _begin)
    return engine
