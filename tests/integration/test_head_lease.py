"""The active head's lease on PostgreSQL (`store/head_lease.py`): one holder at a time, a standby
writes nothing, an expired holder's sessions are ended and its lease taken, and from then on the
old holder can neither write nor renew."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError

from tests.support.stores import open_database
from yolo_orch.errors import NotActiveHead
from yolo_orch.store.head_lease import HeadLease
from yolo_orch.store.postgres_db import PostgresDatabase
from yolo_orch.testing.postgres import PostgresCluster

pytestmark = pytest.mark.postgres


@asynccontextmanager
async def head(url: str) -> AsyncIterator[tuple[PostgresDatabase, HeadLease]]:
    async with open_database(url) as db:
        assert isinstance(db, PostgresDatabase)
        lease = HeadLease(url, db)
        try:
            yield db, lease
        finally:
            await lease.close()


def mark(n: int) -> object:
    def op(conn: Connection) -> None:
        conn.execute(text("INSERT INTO marks VALUES (:n)"), {"n": n})

    return op


async def marks(db: PostgresDatabase) -> list[int]:
    return await db.read(lambda conn: list(conn.execute(text("SELECT n FROM marks")).scalars()))


@pytest.fixture
def url(postgres: PostgresCluster) -> str:
    """A new database with a table the heads write marks to."""
    made = postgres.new_database()
    postgres.sql("CREATE TABLE marks (n int)", made.rsplit("/", 1)[1])
    return made


async def test_one_holder_at_a_time_and_a_standby_writes_nothing(url: str) -> None:
    async with head(url) as (first_db, first), head(url) as (second_db, second):
        assert await first.try_take("first", "http://first", 5) == 1
        assert await second.try_take("second", "http://second", 5) is None
        assert await second.active_url() == "http://first"
        first.fence(1)
        second.fence(None)
        await first_db.write(mark(1))
        with pytest.raises(NotActiveHead, match="standby"):
            await second_db.write(mark(2))
        assert await first.renew(1, 5)
        assert await marks(first_db) == [1]


async def test_an_expired_holder_is_cut_off_and_can_neither_write_nor_renew(url: str) -> None:
    async with head(url) as (old_db, old), head(url) as (new_db, new):
        assert await old.try_take("old", "http://old", 0.3) == 1
        old.fence(1)
        await old_db.write(mark(1))
        # The old holder pauses: it renews no more, but its sessions live on.
        await asyncio.sleep(0.4)
        epoch = None
        for _ in range(50):  # ending its sessions takes the database a moment
            if (epoch := await new.try_take("new", "http://new", 5)) is not None:
                break
            await asyncio.sleep(0.02)
        assert epoch == 2
        new.fence(epoch)
        await new_db.write(mark(2))

        # The old one wakes: its write session was ended, and on a new one the fence holds.
        written = 0
        for _ in range(2):
            try:
                await old_db.write(mark(3))
                written += 1
            except NotActiveHead:
                break
            except OperationalError:
                continue  # the ended session; the next write reconnects
        else:
            pytest.fail("the old holder's writes were never fenced off")
        assert written == 0
        with pytest.raises(OperationalError):  # its lease session was ended too
            await old.renew(1, 5)
        assert not await old.renew(1, 5)  # on a new one: the lock is the new holder's
        assert await new.renew(2, 5)
        assert sorted(await marks(new_db)) == [1, 2]
