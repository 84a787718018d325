"""The PostgreSQL the store tests run against (`postgres`, one cluster per session, a fresh
database per test) and the engines the contract suites run over (`ENGINES`).

Where PostgreSQL's binaries are missing the PostgreSQL cases skip, and fail when `CI` is set:
CI installs the `postgresql` package (.ci/run), so a skip there would hide a lost suite."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.stores import sqlite_url
from yolo_orch.store.migrate import upgrade_to_head
from yolo_orch.testing.postgres import PostgresCluster, postgres_unavailable

ENGINES = ["memory", "sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
"""`params` of a contract suite's store fixture: every store, on every engine."""
DURABLE = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
"""The engines of the durable stores."""


SERVER_DATABASE_OPTION = "--server-database"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        SERVER_DATABASE_OPTION,
        choices=["sqlite", "postgresql"],
        default="sqlite",
        help="the database of the `yolo-orch serve` processes the tests start where they name "
        "none (`server_factory`): SQLite in their data_dir, or a new database of the test "
        "PostgreSQL cluster each; tests marked `sqlite_only` skip on postgresql",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption(SERVER_DATABASE_OPTION) != "postgresql":
        return
    skip = pytest.mark.skip(reason="about SQLite itself (--server-database postgresql)")
    for item in items:
        if item.get_closest_marker("sqlite_only"):
            item.add_marker(skip)


def server_database(request: pytest.FixtureRequest) -> str | None:
    """The `database_url` of a server a test starts without naming one: None (SQLite in its
    data_dir) unless the run asks for PostgreSQL."""
    if request.config.getoption(SERVER_DATABASE_OPTION) != "postgresql":
        return None
    cluster: PostgresCluster = request.getfixturevalue("postgres")
    return cluster.new_database(migrated=False)


def require_postgres() -> None:
    """Skips (or, in CI, fails) the calling test where a cluster cannot be started."""
    reason = postgres_unavailable()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the PostgreSQL tests, but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    """A running cluster whose `new_database()` is migrated to head."""
    require_postgres()
    cluster = PostgresCluster()
    try:
        cluster.start()
        cluster.sql("CREATE DATABASE migrated")
        upgrade_to_head(cluster.url("migrated"))
        cluster.template = "migrated"
        yield cluster
    finally:
        cluster.stop()


async def migrated_url(engine: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new database at head on `engine` ("sqlite" or "postgresql"), by its URL."""
    if engine == "postgresql":
        cluster: PostgresCluster = request.getfixturevalue("postgres")
        return await asyncio.to_thread(cluster.new_database)
    url = sqlite_url(tmp_path)
    await asyncio.to_thread(upgrade_to_head, url)
    return url
