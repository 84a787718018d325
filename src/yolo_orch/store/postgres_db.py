"""The database under the durable stores on PostgreSQL, through psycopg 3: the same ops, the same
one writer with group commit and the same pooled reads as on SQLite (`database.py`); what is
PostgreSQL's is here.

Durability: a caller is answered once its batch's COMMIT has returned, and the write connection
commits with `synchronous_commit` at least `local` (a server configured with `off` is overridden
for this connection only): the commit has flushed the WAL, so a 202 means committed and on disk,
as on SQLite. One batch is one WAL flush, however many requests it answers: the group commit
that the server's own `commit_delay` would otherwise have to guess at.

Writes: READ COMMITTED on the one write connection. Each op's read-then-write sees no other
writer of this server between them (one writer, one transaction at a time). Against a writer in
another process (a second server on the same database, a tool), the dispatcher's claim is one
`UPDATE ... WHERE state = 'queued' RETURNING`: PostgreSQL locks the row and re-checks the
condition once a concurrent writer has committed, so a job is claimed once whoever claims it,
without `FOR UPDATE SKIP LOCKED` (a claim names its job; it does not pick one).

Reads: REPEATABLE READ, READ ONLY, so that an op of several statements (a page of the job list)
sees one snapshot, as a SQLite read transaction does; pooled (`READ_THREADS` connections,
checked before use so that a server restart costs one failed-over connection, not errors).

Wake-ups: every write that makes work for the dispatcher goes through this server's stores,
which wake it in-process, as on SQLite: with several heads on one database only the active one
writes (a standby sends clients to it, `api/heads.py`), so no LISTEN is needed.

Text is compared byte-wise by the stores (an id prefix's range, ISO timestamps): create the
database with `LC_COLLATE 'C'` (`createdb --locale=C --template=template0`); `open` warns if not.
"""

from __future__ import annotations

import logging

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool, QueuePool

from yolo_orch.store.database import READ_THREADS, Database

log = logging.getLogger(__name__)

POSTGRES_DRIVER = "postgresql+psycopg"

_DURABLE_COMMITS = ("on", "remote_write", "remote_apply", "local")
"""Values of `synchronous_commit` at which a COMMIT returns after the local WAL flush."""


def postgres_url(url: str) -> str:
    """The URL SQLAlchemy connects with: psycopg 3's driver, whatever driver name was given."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        raise ValueError(f"not a PostgreSQL database URL: {parsed!r}")
    return parsed.set(drivername=POSTGRES_DRIVER).render_as_string(hide_password=False)


class PostgresDatabase(Database):
    """`Database` on a PostgreSQL server."""

    def __init__(self, database_url: str) -> None:
        super().__init__()
        self._url = postgres_url(database_url)
        self.writer_pid = 0
        """The write connection's server process: ended by a head taking over an expired lease
        (`head_lease`), so that no transaction of the old active's holds the fence."""

    @property
    def dialect(self) -> str:
        return "postgresql"

    async def open(self) -> None:
        named = {"application_name": "yolo-orch"}
        self._reader_engine = create_engine(
            self._url,
            poolclass=QueuePool,
            pool_size=READ_THREADS,
            pool_pre_ping=True,
            connect_args=named,
        ).execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
        self._writer_engine = create_engine(self._url, poolclass=NullPool, connect_args=named)
        self._conn = await self._on_writer(_open_writer, self._writer_engine.connect())
        self.writer_pid = await self._on_writer(_backend_pid, self._conn)

    async def check_writable(self) -> None:
        """A write transaction that finds the server writable: not a standby in recovery, nor
        read-only by its settings. Nothing is committed."""
        read_only = await self.write(_read_only)
        if read_only:
            raise OperationalError("check_writable", {}, Exception(read_only))


def _open_writer(conn: Connection) -> Connection:
    setting = conn.exec_driver_sql("SHOW synchronous_commit").scalar_one()
    if setting not in _DURABLE_COMMITS:  # "off": a COMMIT would return before its flush
        conn.exec_driver_sql("SET synchronous_commit = local")
    collation = conn.execute(
        text("SELECT datcollate FROM pg_database WHERE datname = current_database()")
    ).scalar_one()
    if collation not in ("C", "POSIX"):
        log.warning(
            "database collation is %s, not C: job ids and times are compared as text, and "
            "may sort wrongly (create the database with --locale=C --template=template0)",
            collation,
        )
    conn.commit()
    return conn


def _backend_pid(conn: Connection) -> int:
    pid: int = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
    conn.commit()
    return pid


def _read_only(conn: Connection) -> str | None:
    """Why the server takes no writes, or None."""
    recovery, read_only = conn.execute(
        text("SELECT pg_is_in_recovery(), current_setting('transaction_read_only')")
    ).one()
    if recovery:
        return "the server is a standby in recovery"
    if read_only == "on":
        return "the server's transactions are read-only (default_transaction_read_only)"
    return None
