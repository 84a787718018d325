"""The database under the durable stores: SQLite in WAL mode, every acknowledged write fsynced,
through SQLAlchemy Core on the standard `sqlite3` driver, in threads of its own. One
`SQLiteDatabase` serves both the job store (`sqlite.py`) and the model store
(`sqlite_registry.py`).

Writes: one writer, group commit. SQLite allows one writer at a time, and a durable commit
waits for an fsync of the write-ahead log. So every write is a small synchronous function of a
`Connection` (an "op"), and all writes go through `SQLiteDatabase.write`, which queues the op.
One committer task owns the one write connection and runs the ops in batches, a whole batch in
one call on a worker thread: all the ops that arrived while the previous batch was committing
run in ONE transaction (one `BEGIN IMMEDIATE`, one `COMMIT`), and each op's result or error goes
back to its own caller. Writes stay serialised (one connection, one transaction at a time), and
`BEGIN IMMEDIATE` takes SQLite's write lock before any read, so a read-then-write is never
refused half way with "database is locked"; `busy_timeout` covers a writer in another process
(a migration, a tool).

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

- An op that raises a domain error (`YoloOrchError`: queue full, job finished, ...) wrote
  nothing, and the other ops of its batch go on. An op runs inside a SAVEPOINT, rolled back on
  such an error, unless it is written with `fails_clean`: it raises its domain errors before
  it writes anything (the stores' frequent ops: create, claim, finish, ...), and two
  statements fewer are each a GIL hand-off fewer on the writer's thread.
- Any other error (the database's, or a bug) rolls back the whole batch; its ops are then run
  again one by one, each in its own transaction, so that only the op at fault fails.
- A caller cancelled while it waits does not cancel its op: the op is already queued, and the
  transaction belongs to the committer task, whose thread always ends it (a cancelled
  committer waits for its thread first). No cancellation can leave the write lock held. Reads
  are shielded from their callers' cancellation for the same reason.
- The ops themselves use few statements: `create` is one `INSERT ... SELECT ... WHERE <room in
  the queue> AND <model usable> ON CONFLICT (idempotency_key) DO NOTHING RETURNING *`, and
  reads why only on the rare refusal; the dispatcher's writes are single `UPDATE ...
  RETURNING`s.

Reads: a read is an op too, run in one deferred transaction on a pooled read connection, on
one of `READ_THREADS` threads; thanks to WAL they never wait for the writer.

Why threads and not aiosqlite: aiosqlite hands every statement to its thread and back (a
future, a queue, a loop wake-up, GIL hand-offs), and SQLAlchemy's async layer adds a greenlet
switch per statement; a batch of N creates was 3N + 2 round trips on the event loop. Here a
batch is one hand-off, and the statements run while the loop serves requests (sqlite3 lets the
GIL go while SQLite works and fsyncs). Measured with `bench.submit` (BENCHMARKS.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

import anyio
import anyio.to_thread
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.pool import NullPool, QueuePool

from yolo_orch.errors import (
    YoloOrchError,
)

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
READ_THREADS = 4
"""Reads at once (and pooled read connections)."""


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


_T = TypeVar("_T")

Op = Callable[[Connection], _T]
"""A read or a write: a function of a connection, run inside a transaction on a thread of the
database's (never on the event loop)."""


@dataclass
class _Write(Generic[_T]):
    op: Op[_T]
    future: asyncio.Future[_T]
    fails_clean: bool
    answer_before_fsync: bool
    result: _T | None = None
    error: BaseException | None = None


class SQLiteDatabase:
    """The one write connection with its queue of ops, and a pool of read connections; shared
    by the stores so that all their writes go through one queue."""

    def __init__(self, database_url: str) -> None:
        self._url = sync_url(database_url)
        self._reader_engine: Engine | None = None
        self._writer_engine: Engine | None = None
        self._conn: Connection | None = None
        """The write connection; only the committer task's thread uses it."""
        self._pending: list[_Write[Any]] = []
        self._committer: asyncio.Task[None] | None = None
        self._writer_thread = anyio.CapacityLimiter(1)
        self._wal = _wal_path(self._url)
        """The write-ahead log our sync task fdatasyncs; None for a database without a file or
        not in WAL mode, which then commits with `synchronous=FULL`."""
        self._unsynced: list[_Write[Any]] = []
        """Committed writes whose callers wait for the next sync."""
        self._sync_wanted = False
        self._syncer: asyncio.Task[None] | None = None
        self._sync_thread = anyio.CapacityLimiter(1)
        self._read_threads = anyio.CapacityLimiter(READ_THREADS)

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

    async def close(self) -> None:
        while self._committer is not None:  # answer every write already asked for
            committer = self._committer
            try:
                await asyncio.shield(committer)
            except (Exception, asyncio.CancelledError):
                if not committer.done():  # close() itself was cancelled
                    raise
                # The committer died of it, after answering its batch with the error (a
                # successor, if writes were waiting, is `self._committer` now): close anyway.
                log.warning("the SQLite committer failed", exc_info=not committer.cancelled())
        while self._syncer is not None:  # and every write waiting for its fsync
            syncer = self._syncer
            try:
                await asyncio.shield(syncer)
            except asyncio.CancelledError:
                if not syncer.done():  # close() itself was cancelled
                    raise
        if self._conn is not None:
            await self._on_writer(self._conn.close)
        for engine in (self._writer_engine, self._reader_engine):
            if engine is not None:
                await anyio.to_thread.run_sync(engine.dispose)
        self._reader_engine = self._writer_engine = None
        self._conn = None

    async def write(
        self, op: Op[_T], *, fails_clean: bool = False, answer_before_fsync: bool = False
    ) -> _T:
        """Run `op` in a write transaction; return once that transaction has committed and is
        on disk. `fails_clean`: `op` raises its domain errors only before it writes anything,
        so it needs no savepoint. `answer_before_fsync`: return at the commit, before the fsync
        that follows it (see Durability above)."""
        if self._conn is None:
            raise RuntimeError("SQLiteDatabase is not open; call open() first")
        future: asyncio.Future[_T] = asyncio.get_running_loop().create_future()
        self._pending.append(_Write(op, future, fails_clean, answer_before_fsync))
        if self._committer is None:
            self._committer = asyncio.create_task(self._commit_pending())
        return await future

    async def check_writable(self) -> None:
        """Take SQLite's write lock and commit nothing: fails on a read-only or locked database."""
        await self.write(lambda conn: None)

    async def read(self, op: Op[_T]) -> _T:
        """Run `op` in a read transaction. Shielded: a cancelled caller must not cut a
        transaction short and hand a connection back to the pool in the middle of it."""
        if self._reader_engine is None:
            raise RuntimeError("SQLiteDatabase is not open; call open() first")
        engine = self._reader_engine
        read = asyncio.ensure_future(
            anyio.to_thread.run_sync(_run_read, engine, op, limiter=self._read_threads)
        )
        # A caller cancelled meanwhile never takes the read's error (a job deleted since: not
        # found): taken here, so asyncio logs no "exception was never retrieved" for it.
        read.add_done_callback(_retrieved)
        return await asyncio.shield(read)

    async def _on_writer(self, work: Callable[..., _T], *args: Any) -> _T:
        """`work` on the writer's thread; a cancelled caller waits for it to end first."""
        return await anyio.to_thread.run_sync(work, *args, limiter=self._writer_thread)

    async def _commit_pending(self) -> None:
        """The committer task: runs the waiting writes in batches, one transaction each.

        If it dies (an error `_run_batch` does not catch fails its whole batch), writes queued
        meanwhile get a new committer, rather than waiting for the next `write()` to start one."""
        conn = self._conn
        assert conn is not None
        cancelled = False
        try:
            while self._pending:
                batch, self._pending = self._pending, []
                try:
                    await self._on_writer(_run_batch, conn, batch)
                except BaseException as exc:  # e.g. cancelled at shutdown: answer every caller
                    for write in batch:
                        if write.future.done():
                            pass
                        elif isinstance(exc, asyncio.CancelledError):
                            write.future.cancel()
                        else:
                            write.future.set_exception(exc)
                    cancelled = isinstance(exc, asyncio.CancelledError)
                    raise
                self._committed(batch)
        finally:
            self._committer = None
            if self._pending:
                if cancelled or self._conn is not conn:  # shut down, or closed: nobody commits
                    for write in self._pending:
                        write.future.cancel()
                    self._pending = []
                else:
                    self._committer = asyncio.create_task(self._commit_pending())

    def _committed(self, batch: list[_Write[Any]]) -> None:
        """Answer the writes of a committed batch that need no fsync (refused ones wrote
        nothing); the rest wait for the next sync."""
        for write in batch:
            if write.future.done():  # its caller was cancelled
                continue
            if write.error is not None:
                write.future.set_exception(write.error)
            elif write.answer_before_fsync or self._wal is None:
                write.future.set_result(cast(Any, write.result))
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


def _run_read(engine: Engine, op: Op[_T]) -> _T:
    with engine.connect() as conn, conn.begin():
        return op(conn)


def _run_batch(conn: Connection, batch: list[_Write[Any]]) -> None:
    """One transaction for the whole batch; on an unexpected error, one per write."""
    try:
        with conn.begin():
            for write in batch:
                write.result, write.error = None, None
                try:
                    if write.fails_clean:
                        write.result = write.op(conn)
                    else:
                        with conn.begin_nested():
                            write.result = write.op(conn)
                except YoloOrchError as exc:  # it wrote nothing, or is rolled back to its savepoint
                    write.error = exc
    except Exception as exc:
        _end_transaction(conn)
        if len(batch) == 1:
            batch[0].result, batch[0].error = None, exc
            return
        for write in batch:
            _run_batch(conn, [write])


def _engine(engine: Engine) -> Engine:
    event.listen(engine, "connect", _on_connect)
    event.listen(engine, "begin", _begin)
    return engine


def _end_transaction(conn: Connection) -> None:
    """After a failed COMMIT, SQLite may keep the transaction open: roll it back so that the
    write lock is let go whatever happened. Best effort: the error that got us here is the one
    reported."""
    with contextlib.suppress(Exception):
        dbapi_connection: Any = conn.connection.dbapi_connection
        if dbapi_connection is not None:
            dbapi_connection.rollback()


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
