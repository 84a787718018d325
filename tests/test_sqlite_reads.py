"""Reads of the SQLite database (`sqlite_db.SQLiteDatabase.read`): shielded from a cancelled
caller, and their error then taken, not left for asyncio to log as never retrieved."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.test_store_contract import open_sqlite, sqlite_url
from yolo_orch.errors import JobNotFound
from yolo_orch.store import sqlite_db
from yolo_orch.store.migrate import upgrade_to_head
from yolo_orch.store.sqlite import SQLiteJobStore
from yolo_orch.store.sqlite_db import SQLiteDatabase


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[SQLiteDatabase]:
    url = sqlite_url(tmp_path)
    await asyncio.to_thread(upgrade_to_head, url)
    async with open_sqlite(url) as db:
        yield db


async def test_a_read_whose_caller_went_away_and_then_failed_logs_nothing(
    database: SQLiteDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    started, release, ended = threading.Event(), threading.Event(), threading.Event()
    real = sqlite_db._run_read

    def held_read(*args: Any) -> Any:
        started.set()
        release.wait(10)
        try:
            return real(*args)  # the job is not there: JobNotFound
        finally:
            ended.set()

    monkeypatch.setattr(sqlite_db, "_run_read", held_read)
    unhandled: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _, context: unhandled.append(context))

    caller = asyncio.create_task(SQLiteJobStore(database).get("deleted-meanwhile"))
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
        await SQLiteJobStore(database).get("deleted-meanwhile")
