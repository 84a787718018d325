"""The migrations build exactly the schema the table classes describe, on SQLite and (one
history for both) on PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from tests.support.postgres import DURABLE
from yolo_orch.domain import JobFilter, JobKind, JobState
from yolo_orch.store.databases import engine_url
from yolo_orch.store.migrate import (
    SCHEMA_REVISION,
    alembic_config,
    current_revision,
    head_revision,
    upgrade_to_head,
)
from yolo_orch.store.schema import METADATA
from yolo_orch.store.sql_reads import list_query
from yolo_orch.store.sqlite_db import sync_url
from yolo_orch.testing.postgres import PostgresCluster


@pytest.fixture(params=DURABLE)
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database never migrated: a SQLite file not there yet, or an empty PostgreSQL one."""
    if request.param == "postgresql":
        cluster: PostgresCluster = request.getfixturevalue("postgres")
        return cluster.new_database(migrated=False)
    return f"sqlite+aiosqlite:///{tmp_path / 'not-yet' / 'jobs.sqlite'}"


def _not_rowid(obj: object, name: str | None, kind: str, reflected: bool, _: object) -> bool:
    """PostgreSQL's model tables have a `rowid` column the models leave out (see 0002)."""
    return not (kind == "column" and name == "rowid" and reflected)


def test_upgrade_to_head_matches_the_models(empty_url: str) -> None:
    url = empty_url
    assert current_revision(url) is None

    upgrade_to_head(url)

    engine = create_engine(engine_url(url), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"include_object": _not_rowid})
            assert compare_metadata(context, METADATA) == []
    finally:
        engine.dispose()
    assert current_revision(url) == head_revision() == SCHEMA_REVISION


def test_0002_down_and_up_keeps_jobs_and_never_reuses_a_seq(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'jobs.sqlite'}"
    command.upgrade(alembic_config(url), "0001")
    engine = create_engine(sync_url(url), poolclass=NullPool)
    insert = text(
        "INSERT INTO jobs (id, kind, state, model, spec, priority, gpus, attempt, max_attempts,"
        " devices, cancel_requested, created_at) VALUES"
        " (:id, 'inference', 'queued', 'm', '{}', 0, 1, 0, 3, '[]', 0, 'now')"
    )
    try:
        with engine.begin() as conn:
            conn.execute(insert, [{"id": "kept"}, {"id": "gone"}])
            conn.execute(text("DELETE FROM jobs WHERE id = 'gone'"))

        upgrade_to_head(url)
        command.downgrade(alembic_config(url), "0001")
        upgrade_to_head(url)

        with engine.begin() as conn:
            conn.execute(insert, {"id": "new"})
            rows = conn.execute(text("SELECT id, seq FROM jobs ORDER BY seq")).all()
    finally:
        engine.dispose()
    assert [tuple(row) for row in rows] == [("kept", 1), ("new", 3)]


QUEUE_QUERY = "SELECT id FROM jobs WHERE state = 'queued' ORDER BY priority DESC, seq LIMIT 8"
"""What `SqlJobStore.next_queued` asks."""


def _plan_and_indexes(url: str) -> tuple[str, set[str]]:
    engine = create_engine(sync_url(url), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            plan = conn.execute(text(f"EXPLAIN QUERY PLAN {QUEUE_QUERY}")).all()
            names = conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'index'"))
            return " | ".join(row[-1] for row in plan), set(names.scalars())
    finally:
        engine.dispose()


def test_the_queue_is_read_in_index_order_without_a_sort(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'jobs.sqlite'}"
    upgrade_to_head(url)

    plan, indexes = _plan_and_indexes(url)

    assert "ix_jobs_state_priority_desc_seq" in plan
    assert "TEMP B-TREE" not in plan
    assert "ix_jobs_state_priority_seq" not in indexes


def test_0003_down_and_up_swaps_the_queue_index(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'jobs.sqlite'}"
    upgrade_to_head(url)

    command.downgrade(alembic_config(url), "0002")
    plan, indexes = _plan_and_indexes(url)
    assert "ix_jobs_state_priority_seq" in indexes
    assert "ix_jobs_state_priority_desc_seq" not in indexes
    assert "TEMP B-TREE" in plan  # what 0003 is for

    upgrade_to_head(url)
    _, indexes = _plan_and_indexes(url)
    assert "ix_jobs_state_priority_desc_seq" in indexes
    assert "ix_jobs_state_priority_seq" not in indexes


@pytest.mark.parametrize(
    "where",
    [
        JobFilter(states=(JobState.SUCCEEDED,)),
        JobFilter(kinds=(JobKind.TRAINING,)),
        JobFilter(states=(JobState.SUCCEEDED, JobState.FAILED), kinds=(JobKind.INFERENCE,)),
    ],
    ids=["state", "kind", "both"],
)
def test_filtered_pages_seek_the_list_index_and_never_scan_the_jobs(
    tmp_path: Path, where: JobFilter
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'jobs.sqlite'}"
    upgrade_to_head(url)
    engine = create_engine(sync_url(url), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            stmt, params = list_query(where, 51, before_seq=1000)
            sql = stmt.params(params).compile(conn, compile_kwargs={"literal_binds": True})
            plan = " | ".join(row[-1] for row in conn.execute(text(f"EXPLAIN QUERY PLAN {sql}")))
    finally:
        engine.dispose()

    assert "ix_jobs_state_kind_seq" in plan
    assert "SCAN jobs" not in plan  # a SEARCH by the index or by seq, never every row


INSERT_JOB = text(
    "INSERT INTO jobs (id, kind, state, model, spec, priority, gpus, attempt, max_attempts,"
    " devices, cancel_requested, created_at) VALUES"
    " (:id, :kind, :state, 'm', '{}', 0, 1, 0, 3, '[]', false, 'now')"
)
COUNTED = "SELECT state, kind, count FROM job_counts WHERE count > 0 ORDER BY state, kind"
COUNTED_BY_HAND = "SELECT state, kind, count(*) FROM jobs GROUP BY state, kind ORDER BY state, kind"


def test_0004_counts_the_jobs_there_are_and_triggers_keep_the_counts(
    empty_url: str, tmp_path: Path
) -> None:
    url = empty_url
    (tmp_path / "not-yet").mkdir(exist_ok=True)  # alembic makes no folder (upgrade_to_head does)
    command.upgrade(alembic_config(url), "0003")
    engine = create_engine(engine_url(url), poolclass=NullPool)
    try:
        with engine.begin() as conn:
            conn.execute(
                INSERT_JOB,
                [
                    {"id": "a", "kind": "inference", "state": "succeeded"},
                    {"id": "b", "kind": "inference", "state": "succeeded"},
                    {"id": "c", "kind": "training", "state": "queued"},
                ],
            )
        upgrade_to_head(url)
        with engine.begin() as conn:
            backfilled = [tuple(row) for row in conn.execute(text(COUNTED))]
            conn.execute(INSERT_JOB, {"id": "d", "kind": "training", "state": "queued"})
            conn.execute(text("UPDATE jobs SET state = 'running' WHERE id = 'c'"))
            conn.execute(text("UPDATE jobs SET priority = 5 WHERE id = 'd'"))
            conn.execute(text("UPDATE jobs SET kind = 'training' WHERE id = 'b'"))
            conn.execute(text("DELETE FROM jobs WHERE id = 'a'"))
            kept = [tuple(row) for row in conn.execute(text(COUNTED))]
            by_hand = [tuple(row) for row in conn.execute(text(COUNTED_BY_HAND))]
    finally:
        engine.dispose()

    assert backfilled == [("queued", "training", 1), ("succeeded", "inference", 2)]
    assert (
        kept
        == by_hand
        == [
            ("queued", "training", 1),
            ("running", "training", 1),
            ("succeeded", "training", 1),
        ]
    )


def test_down_to_nothing_and_up_again(empty_url: str) -> None:
    upgrade_to_head(empty_url)
    command.downgrade(alembic_config(empty_url), "base")
    assert current_revision(empty_url) is None
    upgrade_to_head(empty_url)
    assert current_revision(empty_url) == head_revision()


def test_upgrade_to_head_twice_is_harmless(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'jobs.sqlite'}"
    upgrade_to_head(url)
    upgrade_to_head(url)
    assert current_revision(url) == head_revision()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite+aiosqlite:///var/jobs.sqlite", "sqlite:///var/jobs.sqlite"),
        ("sqlite+aiosqlite:////abs/jobs.sqlite", "sqlite:////abs/jobs.sqlite"),
        ("sqlite:///jobs.sqlite", "sqlite:///jobs.sqlite"),
    ],
)
def test_sync_url(url: str, expected: str) -> None:
    assert sync_url(url) == expected


def test_sync_url_refuses_other_databases() -> None:
    with pytest.raises(ValueError, match="not a SQLite"):
        sync_url("postgresql+asyncpg://localhost/jobs")
