"""The SQLite database's sync task (`sqlite_db.py`, Durability): an acknowledged write is on
disk, the writer does not wait for the fsync, and claims and progress are answered at their
commit."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from yolo_orch.domain import JobKind, JobState, NewJob
from yolo_orch.store import sqlite_db
from yolo_orch.store.migrate import upgrade_to_head
from yolo_orch.store.sql_jobs import SqlJobStore
from yolo_orch.store.sqlite_db import SQLiteDatabase

T0 = datetime(2025, 1, 2, tzinfo=UTC)
ROOMY = 1_000


def new_job() -> NewJob:
    return NewJob(kind=JobKind.INFERENCE, model="sim", spec={"inputs": ["a.jpg"], "params": {}})


class HeldSyncs:
    """Stands in for `_sync`: each sync waits for its own `release()` before it fsyncs."""

    def __init__(self, real: Callable[[str], None]) -> None:
        self._real = real
        self._gates: list[threading.Event] = []
        self.started = 0
        self.ended = 0
        self.fail_next: OSError | None = None
        self._all = False
        self._lock = threading.Lock()

    def __call__(self, wal: str) -> None:
        with self._lock:
            self.started += 1
            gate = self._gate(self.started)
        assert gate.wait(10), "a sync was never released"
        failure, self.fail_next = self.fail_next, None
        if failure is not None:
            raise failure
        self._real(wal)
        self.ended += 1

    def release(self, number: int) -> None:
        with self._lock:
            self._gate(number).set()

    def release_all(self) -> None:
        with self._lock:
            self._all = True
            for gate in self._gates:
                gate.set()

    def _gate(self, number: int) -> threading.Event:
        while len(self._gates) < number:
            gate = threading.Event()
            if self._all:
                gate.set()
            self._gates.append(gate)
        return self._gates[number - 1]


@pytest.fixture
async def held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[SqlJobStore, HeldSyncs]]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'jobs.sqlite'}"
    await asyncio.to_thread(upgrade_to_head, url)
    syncs = HeldSyncs(sqlite_db._sync)
    monkeypatch.setattr(sqlite_db, "_sync", syncs)
    db = SQLiteDatabase(url)
    await db.open()
    try:
        yield SqlJobStore(db), syncs
    finally:
        syncs.release_all()
        await db.close()


async def until(condition: Callable[[], bool | Awaitable[bool]]) -> None:
    for _ in range(500):
        met = condition()
        if met if isinstance(met, bool) else await met:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition never held")


async def test_a_write_is_answered_after_the_sync_and_a_claim_at_its_commit(
    held: tuple[SqlJobStore, HeldSyncs],
) -> None:
    store, syncs = held
    syncs.release(1)
    first, _ = await store.create(new_job(), max_queued=ROOMY, now=T0)

    create = asyncio.create_task(store.create(new_job(), max_queued=ROOMY, now=T0))
    claim = asyncio.create_task(store.claim(first.id, ("sim:0",), T0))
    await until(lambda: syncs.started == 2)
    claimed = await asyncio.wait_for(claim, 5)  # its sync is still held

    assert claimed is not None
    assert claimed.state is JobState.RUNNING
    assert not create.done()
    syncs.release(2)
    _, created = await asyncio.wait_for(create, 5)
    assert created
    assert syncs.ended == 2


async def test_a_commit_made_during_a_sync_waits_for_the_next_one(
    held: tuple[SqlJobStore, HeldSyncs],
) -> None:
    store, syncs = held
    first = asyncio.create_task(store.create(new_job(), max_queued=ROOMY, now=T0))
    await until(lambda: syncs.started == 1)
    second = asyncio.create_task(store.create(new_job(), max_queued=ROOMY, now=T0))
    # The writer commits it while the first sync is held: it does not wait for that fsync
    # (and a reader sees the commit before its fsync).
    await until(lambda: _queued(store, 2))

    syncs.release(1)
    await asyncio.wait_for(first, 5)
    await asyncio.sleep(0.05)
    assert not second.done()  # the first sync began before it had committed
    syncs.release(2)
    await asyncio.wait_for(second, 5)


async def test_a_failed_fsync_fails_the_writes_waiting_for_it_and_the_next_ones_go_on(
    held: tuple[SqlJobStore, HeldSyncs],
) -> None:
    store, syncs = held
    syncs.fail_next = OSError(5, "Input/output error")
    syncs.release(1)
    with pytest.raises(OSError, match="Input/output error"):
        await asyncio.wait_for(store.create(new_job(), max_queued=ROOMY, now=T0), 5)

    syncs.release(2)
    _, created = await asyncio.wait_for(store.create(new_job(), max_queued=ROOMY, now=T0), 5)
    assert created


async def _queued(store: SqlJobStore, count: int) -> bool:
    return await store.count_queued() == count


async def test_a_database_not_in_wal_mode_keeps_fsyncing_in_its_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'jobs.sqlite'}"
    await asyncio.to_thread(upgrade_to_head, url)
    no_wal = tuple(p for p in sqlite_db._PRAGMAS if "journal_mode" not in p)
    monkeypatch.setattr(sqlite_db, "_PRAGMAS", (*no_wal, "PRAGMA journal_mode=DELETE"))
    syncs = HeldSyncs(sqlite_db._sync)
    monkeypatch.setattr(sqlite_db, "_sync", syncs)
    db = SQLiteDatabase(url)
    await db.open()
    try:
        _, created = await SqlJobStore(db).create(new_job(), max_queued=ROOMY, now=T0)
        synchronous = await db.write(
            lambda conn: conn.exec_driver_sql("PRAGMA synchronous").scalar()
        )
    finally:
        await db.close()

    assert created
    assert synchronous == 2  # FULL: SQLite fsyncs at each commit
    assert syncs.started == 0
