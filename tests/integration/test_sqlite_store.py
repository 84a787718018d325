"""The SQLite store beyond the contract that every store keeps (test_store_contract.py): many
operations at once, a restart, and the writer's group commit."""

from __future__ import annotations

import asyncio
import gc
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from tests.support.stores import ROOMY, T0, add, new_job, open_sqlite, running, sqlite_url
from yolo_orch.domain import Job, JobFilter, JobState, Outcome, Progress
from yolo_orch.errors import JobNotFound, QueueFull
from yolo_orch.store.migrate import upgrade_to_head
from yolo_orch.store.sql_jobs import SqlJobStore
from yolo_orch.store.sqlite_db import SQLiteDatabase, sync_url
from yolo_orch.store.tables import JOBS, new_job_values


async def test_sqlite_survives_500_concurrent_mixed_operations(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    await asyncio.to_thread(upgrade_to_head, url)
    async with open_sqlite(url) as db:
        store = SqlJobStore(db)
        seeded = [await add(store) for _ in range(100)]
        operations = [
            *(store.create(new_job(), max_queued=ROOMY, now=T0) for _ in range(200)),
            *(store.get(job.id) for job in seeded),
            *(store.list_jobs(JobFilter(), limit=20, before_seq=None) for _ in range(100)),
            *(store.claim(job.id, ("sim:0",), T0) for job in seeded),
        ]

        # Any "database is locked" (OperationalError) would propagate out of gather.
        await asyncio.gather(*operations)

        assert await store.count_queued() == 200
        running_jobs = await store.list_jobs(
            JobFilter(states=(JobState.RUNNING,)), limit=1_000, before_seq=None
        )
        assert {job.id for job in running_jobs.jobs} == {job.id for job in seeded}


async def test_sqlite_data_survives_a_restart(tmp_path: Path) -> None:
    url = sqlite_url(tmp_path)
    await asyncio.to_thread(upgrade_to_head, url)
    async with open_sqlite(url) as db:
        before = SqlJobStore(db)
        job = await running(before, idempotency_key="key", request_fingerprint="fp")
        await before.set_progress(job.id, Progress(1, 2, "image"))
        finished = await before.finish(
            job.id, Outcome(JobState.SUCCEEDED, result={"images": 2}), T0
        )
        queued = await add(before)

    async with open_sqlite(url) as db:
        after = SqlJobStore(db)
        assert await after.get(job.id) == finished
        assert await after.get(queued.id) == queued
        assert [job.id for job in await after.next_queued(limit=10)] == [queued.id]
        again, created = await after.create(
            new_job(idempotency_key="key", request_fingerprint="fp"), max_queued=ROOMY, now=T0
        )
        assert (again, created) == (finished, False)


# Group commit: the SQLite writer runs the writes waiting at one moment in one transaction.


def _insert_then(error: Exception, job_id: str) -> Any:
    def op(conn: Connection) -> None:
        conn.execute(insert(JOBS).values(new_job_values(new_job(id=job_id), T0)))
        raise error

    return op


def _has_job(conn: Connection, job_id: str) -> bool:
    return conn.execute(select(JOBS.c.id).where(JOBS.c.id == job_id)).first() is not None


@pytest.fixture
async def sqlite_db(tmp_path: Path) -> AsyncIterator[SQLiteDatabase]:
    url = sqlite_url(tmp_path)
    await asyncio.to_thread(upgrade_to_head, url)
    async with open_sqlite(url) as db:
        yield db


async def test_sqlite_writes_waiting_together_share_one_transaction(
    sqlite_db: SQLiteDatabase,
) -> None:
    transactions = await asyncio.gather(
        *(sqlite_db.write(lambda conn: conn.get_transaction()) for _ in range(20))
    )

    assert len({id(transaction) for transaction in transactions}) < 20


async def test_sqlite_a_domain_error_undoes_only_its_own_write(sqlite_db: SQLiteDatabase) -> None:
    store = SqlJobStore(sqlite_db)

    results = await asyncio.gather(
        store.create(new_job(), max_queued=ROOMY, now=T0),
        sqlite_db.write(_insert_then(JobNotFound("x"), "undone")),
        store.create(new_job(), max_queued=ROOMY, now=T0),
        return_exceptions=True,
    )

    assert isinstance(results[1], JobNotFound)
    assert [type(result) for result in (results[0], results[2])] == [tuple, tuple]
    assert not await sqlite_db.write(lambda conn: _has_job(conn, "undone"))
    assert await store.count_queued() == 2


async def test_sqlite_a_refusal_without_a_savepoint_leaves_its_batch_whole(
    sqlite_db: SQLiteDatabase,
) -> None:
    store = SqlJobStore(sqlite_db)
    first = await store.create(new_job(), max_queued=ROOMY, now=T0)

    results = await asyncio.gather(  # creates are written without savepoints (fails_clean)
        store.create(new_job(), max_queued=ROOMY, now=T0),
        store.create(new_job(), max_queued=1, now=T0),  # the queue holds one already
        store.claim(first[0].id, ("sim:0",), T0),
        return_exceptions=True,
    )

    assert isinstance(results[1], QueueFull)
    assert isinstance(results[2], Job)
    assert results[2].state is JobState.RUNNING
    assert await store.counts() == {("queued", "inference"): 1, ("running", "inference"): 1}


async def test_sqlite_an_unexpected_error_fails_only_its_own_write(
    sqlite_db: SQLiteDatabase,
) -> None:
    store = SqlJobStore(sqlite_db)

    results = await asyncio.gather(
        store.create(new_job(), max_queued=ROOMY, now=T0),
        sqlite_db.write(_insert_then(RuntimeError("bug"), "rolled-back")),
        store.create(new_job(), max_queued=ROOMY, now=T0),
        return_exceptions=True,
    )

    assert isinstance(results[1], RuntimeError)
    assert [type(result) for result in (results[0], results[2])] == [tuple, tuple]
    assert not await sqlite_db.write(lambda conn: _has_job(conn, "rolled-back"))
    assert await store.count_queued() == 2


async def test_sqlite_cancelled_callers_never_leave_the_write_lock_held(
    sqlite_db: SQLiteDatabase, tmp_path: Path
) -> None:
    store = SqlJobStore(sqlite_db)
    job = await running(store)
    calls = [
        lambda: store.create(new_job(), max_queued=ROOMY, now=T0),
        lambda: store.set_progress(job.id, Progress(1, 20, "image")),
        lambda: store.get(job.id),
        lambda: store.next_queued(10),
    ]
    tasks = [asyncio.create_task(calls[i % len(calls)]()) for i in range(40)]
    for task in tasks:  # cancelled at every stage: queued, in a batch, answered
        task.cancel()
        await asyncio.sleep(0.0005)
    await asyncio.gather(*tasks, return_exceptions=True)

    await store.check_writable()
    _, created = await store.create(new_job(), max_queued=ROOMY, now=T0)
    assert created
    assert (await store.get(job.id)).state is JobState.RUNNING
    # Another connection can take the write lock at once: no transaction was left open.
    other = sqlite3.connect(sync_url(sqlite_url(tmp_path)).removeprefix("sqlite:///"), timeout=0)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
    finally:
        other.close()


async def test_sqlite_a_read_whose_caller_went_away_and_then_failed_logs_nothing(
    sqlite_db: SQLiteDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, release, ended = threading.Event(), threading.Event(), threading.Event()
    from yolo_orch.store import database as sqlite_module

    real = sqlite_module._run_read

    def held_read(*args: Any) -> Any:
        started.set()
        release.wait(10)
        try:
            return real(*args)  # the job is not there: JobNotFound
        finally:
            ended.set()

    monkeypatch.setattr(sqlite_module, "_run_read", held_read)
    unhandled: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _, context: unhandled.append(context))

    caller = asyncio.create_task(SqlJobStore(sqlite_db).get("deleted-meanwhile"))
    await asyncio.to_thread(started.wait, 10)
    caller.cancel()  # as an event stream's client going away during a retention sweep
    with pytest.raises(asyncio.CancelledError):
        await caller
    release.set()
    await asyncio.to_thread(ended.wait, 10)
    for _ in range(5):  # the read's future takes its result on the loop
        await asyncio.sleep(0)
    gc.collect()

    assert unhandled == []
    with pytest.raises(JobNotFound):  # and reads go on as ever
        await SqlJobStore(sqlite_db).get("deleted-meanwhile")


class _DiesOnce:
    """Stands in for `_run_batch` (on the writer's thread): its first batch waits at `gate`,
    then fails with an error `_run_batch` never lets out (a driver's), killing the committer;
    later batches run normally."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from yolo_orch.store import database as sqlite_module

        self._real = sqlite_module._run_batch
        self._started = threading.Event()
        self.gate = threading.Event()
        self.calls = 0
        monkeypatch.setattr(sqlite_module, "_run_batch", self)

    async def started(self) -> None:
        assert await asyncio.to_thread(self._started.wait, 10), "the writer never ran a batch"

    def __call__(self, conn: Connection, batch: list[Any], *rest: Any) -> None:
        self.calls += 1
        if self.calls > 1:
            return self._real(conn, batch, *rest)
        self._started.set()
        self.gate.wait()  # the event loop runs: other writes get queued meanwhile
        raise RuntimeError("the connection broke")


async def test_sqlite_writes_queued_while_the_committer_dies_are_still_committed(
    sqlite_db: SQLiteDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    dies = _DiesOnce(monkeypatch)
    first = asyncio.create_task(sqlite_db.write(lambda conn: "first"))
    await dies.started()
    second = asyncio.create_task(sqlite_db.write(lambda conn: "second"))
    await asyncio.sleep(0)  # `second` is in `_pending`, behind the batch in flight
    dies.gate.set()

    with pytest.raises(RuntimeError, match="the connection broke"):
        await first
    # Without a new committer `second` would wait for some later write() to start one.
    assert await asyncio.wait_for(second, timeout=5) == "second"


async def test_sqlite_close_survives_a_dead_committer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = sqlite_url(tmp_path)
    await asyncio.to_thread(upgrade_to_head, url)
    db = SQLiteDatabase(url)
    await db.open()
    dies = _DiesOnce(monkeypatch)
    first = asyncio.create_task(db.write(lambda conn: "first"))
    await dies.started()
    second = asyncio.create_task(db.write(lambda conn: "second"))
    await asyncio.sleep(0)
    closing = asyncio.create_task(db.close())
    await asyncio.sleep(0)
    dies.gate.set()

    await asyncio.wait_for(closing, timeout=5)  # does not raise the committer's error

    with pytest.raises(RuntimeError, match="the connection broke"):
        await first
    assert await second == "second"  # close() answers every write asked for before it
    assert db._conn is None  # close() ran to its end: connection closed, engines disposed
    assert db._writer_engine is None
    assert db._reader_engine is None
