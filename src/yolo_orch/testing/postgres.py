"""A throwaway PostgreSQL cluster for tests and benchmarks: Debian's `postgresql` binaries,
`initdb` in a temporary folder, a server on a free loopback port with its socket in that folder,
one database per test (copied from a migrated template, which is far cheaper than migrating
each), and everything removed at `stop`.

`initdb` refuses to run as root: as root, the cluster runs as the `postgres` user the package
made (`runuser`), its folder handed to that user. Plain functions and a class, no pytest: the
tests' conftest wraps them in a fixture.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from yolo_orch.testing.server import free_port

PG_BIN_DIRS = tuple(Path("/usr/lib/postgresql").glob("*/bin"))
"""Where Debian's `postgresql` package puts each version's server binaries."""
_ADMIN_DATABASE = "postgres"


def pg_bin_dir() -> Path | None:
    """The newest installed version's binaries (`initdb`, `pg_ctl`), or None."""
    found = sorted(
        (path for path in PG_BIN_DIRS if (path / "initdb").is_file()),
        key=lambda path: int(path.parent.name) if path.parent.name.isdigit() else 0,
    )
    on_path = shutil.which("pg_ctl")
    if found:
        return found[-1]
    return Path(on_path).parent if on_path else None


def postgres_unavailable() -> str | None:
    """Why a cluster cannot be started here, or None."""
    if pg_bin_dir() is None:
        return "PostgreSQL's server binaries are not installed (apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no `postgres` user to run initdb as"
    return None


class PostgresCluster:
    """`start()`, then `new_database()` per test; `stop()` removes everything."""

    def __init__(self, *, fsync: bool = False) -> None:
        """`fsync=False` (the default) spares the disk: a throwaway cluster outlives no power
        loss, and a database per test is created in a fifth of the time. The server's commits
        still wait for the write to its WAL, which is what a crash of yolo-orch tests."""
        bin_dir = pg_bin_dir()
        if bin_dir is None:
            raise RuntimeError(postgres_unavailable())
        self._bin = bin_dir
        self._root = Path(tempfile.mkdtemp(prefix="yolo-orch-pg-"))
        self._data = self._root / "data"
        self.port = free_port()
        self._as_postgres = os.geteuid() == 0
        self.user = "postgres" if self._as_postgres else pwd.getpwuid(os.geteuid()).pw_name
        self._fsync = "on" if fsync else "off"
        self._names = itertools.count(1)
        self.template: str | None = None
        """A database copied by `new_database`: set it once it is migrated."""

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        if self._as_postgres:
            shutil.chown(self._root, "postgres", "postgres")
        # C collation: the stores compare text byte-wise (see store/postgres_db.py).
        initdb = ["-D", str(self._data), "-A", "trust", "-E", "UTF8", "--locale=C"]
        self._run("initdb", *initdb, *(() if self._fsync == "on" else ("--no-sync",)))
        self._pg_ctl("start")

    def restart(self) -> None:
        """Stop the server (ending every connection) and start it again."""
        self._pg_ctl("restart", "-m", "fast")

    def _pg_ctl(self, action: str, *args: str) -> None:
        options = f"-k {self._root} -p {self.port} -c listen_addresses=127.0.0.1"
        options += f" -c fsync={self._fsync}"
        # -l: the server's output to a file; a pipe of ours would keep `_run` waiting for it.
        log = str(self._root / "server.log")
        self._run("pg_ctl", "-D", str(self._data), "-l", log, "-o", options, "-w", *args, action)

    def halt(self) -> None:
        """Stop the server (every connection ends), keeping its data: an outage, until
        `resume`."""
        self._run("pg_ctl", "-D", str(self._data), "-m", "fast", "-w", "stop")

    def resume(self) -> None:
        self._pg_ctl("start")

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            if (self._data / "postmaster.pid").exists():
                self._run("pg_ctl", "-D", str(self._data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self._root, ignore_errors=True)

    def new_database(self, *, migrated: bool = True) -> str:
        """A new database, a copy of `template` if it is set and `migrated`, else empty; its
        URL."""
        name = f"test_{next(self._names)}"
        template = f" TEMPLATE {self.template}" if self.template and migrated else ""
        self.sql(f"CREATE DATABASE {name}{template}")
        return self.url(name)

    def sql(self, statement: str, database: str = _ADMIN_DATABASE) -> object:
        """Run one statement as the superuser (autocommit: CREATE DATABASE needs it); the first
        column of its first row, if it returns rows."""
        import psycopg

        conninfo = f"host=127.0.0.1 port={self.port} user={self.user} dbname={database}"
        with psycopg.connect(conninfo, autocommit=True) as conn:
            cursor = conn.execute(statement.encode())
            row = cursor.fetchone() if cursor.description else None
            return None if row is None else row[0]

    def server_log(self) -> str:
        path = self._root / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self._bin / tool), *args]
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, cwd=self._root)


@contextlib.contextmanager
def postgres_cluster() -> Iterator[PostgresCluster]:
    cluster = PostgresCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
