"""What the durable stores' databases share, SQLite (`sqlite_db.py`) and PostgreSQL
(`postgres_db.py`): ops, one writer with group commit, and pooled reads. The stores' ops are
SQLAlchemy Core on a `Connection`, the same for both engines; a database decides only how its
connections are made, how a transaction begins, and when a commit is durable.

Writes: one writer, group commit. Every write is a small synchronous function of a
`Connection` (an "op"), and all writes go through `Database.write`, which queues the op. One
committer task owns the one write connection and runs the ops in batches, a whole batch in one
call on a worker thread: all the ops that arrived while the previous batch was committing run
in ONE transaction, and each op's result or error goes back to its own caller. Writes stay
serialised (one connection, one transaction at a time): an op's read-then-write sees no other
writer of this process between them. On SQLite that is also the only way to write; on
PostgreSQL it keeps one durable commit (one WAL flush) per batch instead of one per request.

- An op that raises a domain error (`YoloOrchError`: queue full, job finished, ...) wrote
  nothing, and the other ops of its batch go on. An op runs inside a SAVEPOINT, rolled back on
  such an error, unless it is written with `fails_clean`: it raises its domain errors before
  it writes anything (the stores' frequent ops: create, claim, finish, ...), and two
  statements fewer are each a GIL hand-off fewer on the writer's thread.
- Any other error (the database's, or a bug) rolls back the whole batch; its ops are then run
  again one by one, each in its own transaction, so that only the op at fault fails.
- A caller cancelled while it waits does not cancel its op: the op is already queued, and the
  transaction belongs to the committer task, whose thread always ends it (a cancelled
  committer waits for its thread first). No cancellation can leave a transaction open. Reads
  are shielded from their callers' cancellation for the same reason.
- When a caller is answered is the database's (`_committed`): SQLite answers after an fsync of
  its log that began after the commit, PostgreSQL at the commit (which has flushed its WAL).

Reads: a read is an op too, run in one transaction on a pooled read connection, on one of
`READ_THREADS` threads; they never wait for the writer.

Why threads and not an async driver: an async driver hands every statement to the loop and
back, and SQLAlchemy's async layer adds a greenlet switch per statement; here a batch is one
hand-off, and the statements run while the loop serves requests (the drivers let the GIL go
while the database works). Measured with `bench.submit` (BENCHMARKS.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

import anyio
import anyio.to_thread
from sqlalchemy import Engine
from sqlalchemy.engine import Connection

from yolo_orch.errors import YoloOrchError

log = logging.getLogger(__name__)

READ_THREADS = 4
"""Reads at once (and pooled read connections)."""

_T = TypeVar("_T")

Op = Callable[[Connection], _T]
"""A read or a write: a function of a connection, run inside a transaction on a thread of the
database's (never on the event loop)."""


@dataclass
class QueuedWrite(Generic[_T]):
    op: Op[_T]
    future: asyncio.Future[_T]
    fails_clean: bool
    answer_before_fsync: bool
    result: _T | None = None
    error: BaseException | None = None


class Database:
    """The one write connection with its queue of ops, and a pool of read connections; shared
    by the stores so that all their writes go through one queue. A subclass's `open` sets
    `_reader_engine`, `_writer_engine` and `_conn`."""

    def __init__(self) -> None:
        self._reader_engine: Engine | None = None
        self._writer_engine: Engine | None = None
        self._conn: Connection | None = None
        """The write connection; only the committer task's thread uses it."""
        self._pending: list[QueuedWrite[Any]] = []
        self._committer: asyncio.Task[None] | None = None
        self._writer_thread = anyio.CapacityLimiter(1)
        self._read_threads = anyio.CapacityLimiter(READ_THREADS)
        self.fence: Op[None] | None = None
        """Run first in every write transaction; raises when this server may not write (heads
        on PostgreSQL: `head_lease.Fence`), failing the whole batch and committing nothing."""

    @property
    def dialect(self) -> str:
        """ "sqlite" or "postgresql": SQLAlchemy's name of the engine's dialect."""
        raise NotImplementedError

    async def open(self) -> None:
        raise NotImplementedError

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
                log.warning("the database's committer failed", exc_info=not committer.cancelled())
        await self._writes_answered()
        if self._conn is not None:
            await self._on_writer(self._conn.close)
        for engine in (self._writer_engine, self._reader_engine):
            if engine is not None:
                await anyio.to_thread.run_sync(engine.dispose)
        self._reader_engine = self._writer_engine = None
        self._conn = None

    async def _writes_answered(self) -> None:
        """At close, once the committer has ended: wait for the writes it left unanswered."""

    async def write(
        self, op: Op[_T], *, fails_clean: bool = False, answer_before_fsync: bool = False
    ) -> _T:
        """Run `op` in a write transaction; return once that transaction has committed and is
        on disk. `fails_clean`: `op` raises its domain errors only before it writes anything,
        so it needs no savepoint. `answer_before_fsync`: the caller may be answered at the
        commit, before the database's own sync of it, where it has one (SQLite's)."""
        if self._conn is None:
            raise RuntimeError(f"{type(self).__name__} is not open; call open() first")
        future: asyncio.Future[_T] = asyncio.get_running_loop().create_future()
        self._pending.append(QueuedWrite(op, future, fails_clean, answer_before_fsync))
        if self._committer is None:
            self._committer = asyncio.create_task(self._commit_pending())
        return await future

    async def check_writable(self) -> None:
        """Fails on a database this server cannot write."""
        raise NotImplementedError

    async def read(self, op: Op[_T]) -> _T:
        """Run `op` in a read transaction. Shielded: a cancelled caller must not cut a
        transaction short and hand a connection back to the pool in the middle of it."""
        if self._reader_engine is None:
            raise RuntimeError(f"{type(self).__name__} is not open; call open() first")
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
                    await self._on_writer(_run_batch, conn, batch, self.fence)
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

    def _committed(self, batch: list[QueuedWrite[Any]]) -> None:
        """Answer the writes of a committed batch: here at once, for a database whose commit
        is durable when it returns."""
        for write in batch:
            answer(write)


def answer(write: QueuedWrite[Any]) -> None:
    """Hand a write's result or error to its caller (unless the caller was cancelled)."""
    if write.future.done():
        return
    if write.error is not None:
        write.future.set_exception(write.error)
    else:
        write.future.set_result(cast(Any, write.result))


def _run_read(engine: Engine, op: Op[_T]) -> _T:
    with engine.connect() as conn, conn.begin():
        return op(conn)


def _run_batch(
    conn: Connection, batch: list[QueuedWrite[Any]], fence: Op[None] | None = None
) -> None:
    """One transaction for the whole batch; on an unexpected error, one per write."""
    try:
        with conn.begin():
            if fence is not None:
                fence(conn)
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
            _run_batch(conn, [write], fence)


def _end_transaction(conn: Connection) -> None:
    """After a failed COMMIT, SQLite may keep the transaction open (and PostgreSQL's is
    aborted): roll it back so that the write lock is let go whatever happened. Best effort: the
    error that got us here is the one reported."""
    with contextlib.suppress(Exception):
        dbapi_connection: Any = conn.connection.dbapi_connection
        if dbapi_connection is not None:
            dbapi_connection.rollback()


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
