"""What the PostgreSQL database promises beyond the shared contract (`store/postgres_db.py`):
claims stay single when two servers' stores claim the same jobs at once, an answered write is
committed where another connection sees it, commits wait for their WAL flush even where the
server says not to, and a server that takes no writes is reported as such."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from sqlalchemy import create_engine, select, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.pool import NullPool

from tests.support.stores import T0, add, open_database
from yolo_orch.store.databases import engine_url
from yolo_orch.store.sql_jobs import SqlJobStore
from yolo_orch.store.tables import JOBS
from yolo_orch.testing.postgres import PostgresCluster

pytestmark = pytest.mark.postgres

JOBS_TO_CLAIM = 60


async def test_two_stores_claiming_the_same_jobs_at_once_claim_each_once(
    postgres: PostgresCluster,
) -> None:
    url = postgres.new_database()
    async with open_database(url) as first_db, open_database(url) as second_db:
        first, second = SqlJobStore(first_db), SqlJobStore(second_db)
        jobs = [await add(first) for _ in range(JOBS_TO_CLAIM)]

        claims = await asyncio.gather(
            *(
                store.claim(job.id, (lane,), T0)
                for job in jobs
                for store, lane in ((first, "sim:0"), (second, "sim:1"))
            )
        )

        claimed = Counter(job.id for job in claims if job is not None)
        assert claimed == Counter({job.id: 1 for job in jobs})
        for job in jobs:
            stored = await second.get(job.id)
            assert stored.attempt == 1
            assert stored.devices in (("sim:0",), ("sim:1",))


async def test_an_answered_write_is_committed_for_every_connection(
    postgres: PostgresCluster,
) -> None:
    url = postgres.new_database()
    engine = create_engine(engine_url(url), poolclass=NullPool)
    try:
        async with open_database(url) as db:
            store = SqlJobStore(db)
            written = await asyncio.gather(*(add(store) for _ in range(20)))
            with engine.connect() as other:
                ids = set(other.execute(select(JOBS.c.id)).scalars())
        assert ids == {job.id for job in written}
    finally:
        engine.dispose()


async def test_commits_wait_for_the_wal_flush_even_where_the_server_says_off(
    postgres: PostgresCluster,
) -> None:
    url = postgres.new_database()
    database = url.rsplit("/", 1)[1]
    postgres.sql(f"ALTER DATABASE {database} SET synchronous_commit = off")
    async with open_database(url) as db:
        setting = await db.write(
            lambda conn: conn.exec_driver_sql("SHOW synchronous_commit").scalar()
        )
    assert setting == "local"


async def test_after_the_server_restarts_writes_and_reads_go_on(
    postgres: PostgresCluster,
) -> None:
    """The write connection cut by the restart fails the one batch it was running (whether it
    committed is not known to us, so it is not run again); the next batch reconnects, and the
    read pool checks its connections before use."""
    url = postgres.new_database()
    async with open_database(url) as db:
        store = SqlJobStore(db)
        await add(store)
        await asyncio.to_thread(postgres.restart)
        with pytest.raises(OperationalError):
            await add(store)
        await add(store)
        assert await store.count_queued() == 2


async def test_a_read_only_server_is_not_writable(postgres: PostgresCluster) -> None:
    url = postgres.new_database()
    database = url.rsplit("/", 1)[1]
    async with open_database(url) as db:
        await db.check_writable()
    postgres.sql(f"ALTER DATABASE {database} SET default_transaction_read_only = on")
    async with open_database(url) as db:
        with pytest.raises(OperationalError, match="read-only"):
            await db.check_writable()
        assert await db.read(lambda conn: conn.execute(text("SELECT 1")).scalar()) == 1
