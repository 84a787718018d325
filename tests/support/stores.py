"""What the store tests share: jobs to store, and a database to keep them in."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from yolo_orch.domain import Job, JobKind, NewJob
from yolo_orch.store.base import JobStore
from yolo_orch.store.database import Database
from yolo_orch.store.databases import database_for
from yolo_orch.store.sqlite_db import SQLiteDatabase

T0 = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
ROOMY = 1_000
"""A queue bound no test reaches unless it means to."""


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'db' / 'jobs.sqlite'}"


@asynccontextmanager
async def open_database(url: str) -> AsyncIterator[Database]:
    """The database `url` names (SQLite or PostgreSQL), open."""
    db = database_for(url)
    await db.open()
    try:
        yield db
    finally:
        await db.close()


@asynccontextmanager
async def open_sqlite(url: str) -> AsyncIterator[SQLiteDatabase]:
    db = SQLiteDatabase(url)
    await db.open()
    try:
        yield db
    finally:
        await db.close()


def new_job(**changes: Any) -> NewJob:
    job = NewJob(
        kind=JobKind.INFERENCE,
        model="yolo11n",
        spec={"inputs": ["a/*.jpg"], "params": {"imgsz": 640, "conf": 0.25}},
    )
    return replace(job, **changes)


async def add(store: JobStore, now: datetime = T0, **changes: Any) -> Job:
    job, created = await store.create(new_job(**changes), max_queued=ROOMY, now=now)
    assert created
    return job


async def running(store: JobStore, now: datetime = T0, **changes: Any) -> Job:
    job = await store.claim((await add(store, now, **changes)).id, ("sim:0",), now)
    assert job is not None
    return job
