"""The job store's reads that take more than one statement to say: a page of the job list
(each (state, kind) pair from its own index range) and the head of a queue whose jobs age."""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import Integer, Select, bindparam, select, text, union_all
from sqlalchemy.engine import Connection

from yolo_orch.domain import Job, JobFilter, JobKind, JobState, QueueOrder
from yolo_orch.store.tables import JOBS, UTCDateTime, job_from_row


def list_query(
    where: JobFilter, limit: int, before_seq: int | None
) -> tuple[Select[Any], dict[str, Any]]:
    """The statement of a page of `where`, and its parameters."""
    params: dict[str, Any] = {"page_limit": limit}
    if before_seq is not None:
        params["before_seq"] = before_seq
    if where.chain_id is not None or where.id_prefix is not None or where.model is not None:
        return _narrow_statement(where, params, before_seq), params
    return _list_statement(where.states, where.kinds, paged=before_seq is not None), params


_LAST_CHARACTER = "\U0010ffff"
"""Above every character in SQLite's BINARY order (UTF-8 bytes), and in PostgreSQL's "C"
collation (see `postgres_db.py`): `id >= p AND id < p + this` holds the ids that start with `p`
and reads them from the index on `id` (LIKE would be case-insensitive, and not use it)."""


def _narrow_statement(
    where: JobFilter, params: dict[str, Any], before_seq: int | None
) -> Select[Any]:
    """A chain's jobs (through the index on `chain_id`), the jobs whose id starts with a prefix
    (the index on `id`), or those that name a model, newest first. A model alone has no index:
    its rows are read newest first until a page is full."""
    stmt = select(JOBS)
    if where.chain_id is not None:
        params["chain_id"] = where.chain_id
        stmt = stmt.where(JOBS.c.chain_id == bindparam("chain_id"))
    if where.id_prefix is not None:
        params["id_from"] = where.id_prefix
        params["id_to"] = where.id_prefix + _LAST_CHARACTER
        stmt = stmt.where(JOBS.c.id >= bindparam("id_from"), JOBS.c.id < bindparam("id_to"))
    if where.model is not None:
        params["model"] = where.model
        stmt = stmt.where(JOBS.c.model == bindparam("model"))
    if where.states:
        stmt = stmt.where(JOBS.c.state.in_([str(state) for state in where.states]))
    if where.kinds:
        stmt = stmt.where(JOBS.c.kind.in_([str(kind) for kind in where.kinds]))
    if before_seq is not None:
        stmt = stmt.where(JOBS.c.seq < bindparam("before_seq", type_=Integer))
    return stmt.order_by(JOBS.c.seq.desc()).limit(bindparam("page_limit", type_=Integer))


@functools.lru_cache(maxsize=64)
def _list_statement(
    states: tuple[JobState, ...], kinds: tuple[JobKind, ...], *, paged: bool
) -> Select[Any]:
    """Newest first, `page_limit` rows after `before_seq` (if `paged`). With a filter, each
    (state, kind) pair it allows is read from its own range of the index (state, kind, seq),
    newest first, `page_limit` rows at most; the newest of those are the page. So a page costs
    a few index seeks and not a sort of every match, which `state IN (...) ORDER BY seq DESC`
    over a long history would be. Built once for each filter: building its subqueries cost
    SQLAlchemy 1.4 ms, more than running them."""
    limit = bindparam("page_limit", type_=Integer)
    stmt = select(JOBS).order_by(JOBS.c.seq.desc()).limit(limit)
    older = JOBS.c.seq < bindparam("before_seq", type_=Integer) if paged else None
    if not states and not kinds:
        return stmt if older is None else stmt.where(older)
    pairs = [
        select(JOBS.c.seq)
        .where(JOBS.c.state == str(state), JOBS.c.kind == str(kind))
        .where(*(() if older is None else (older,)))
        .order_by(JOBS.c.seq.desc())
        .limit(limit)
        .subquery()
        for state in states or tuple(JobState)
        for kind in kinds or tuple(JobKind)
    ]
    candidates = union_all(*(select(pair.c.seq) for pair in pairs)).subquery()
    newest = select(candidates.c.seq).order_by(candidates.c.seq.desc()).limit(limit)
    return stmt.where(JOBS.c.seq.in_(newest))


def aged_queue_head(limit: int, order: QueueOrder, conn: Connection) -> list[Job]:
    """The first `limit` jobs by effective priority. Within one priority the oldest job has
    aged the most, so the answer lies among the first `limit` of each priority: one statement
    seeks each priority queued (at most 201, `priority` is -100..100) and reads its head from
    the index (state, priority DESC, seq), whatever the queue's or the history's size; only
    the winners' full rows are read. Sorting the queue by a computed priority in SQL would
    read every queued row."""
    max_gpus = order.max_gpus if order.max_gpus is not None else 2**31
    heads = conn.execute(_AGED_HEADS, {"limit": limit, "max_gpus": max_gpus}).all()
    ranked = sorted(
        heads, key=lambda h: (-order.effective_priority(h.priority, h.created_at), h.seq)
    )
    winners = [head.seq for head in ranked[:limit]]
    rows = conn.execute(select(JOBS).where(JOBS.c.seq.in_(winners))).mappings()
    return order.sort([job_from_row(row) for row in rows])


_AGED_HEADS = text(
    """
    WITH RECURSIVE priorities(p) AS (
        SELECT max(priority) FROM jobs WHERE state = 'queued'
        UNION ALL
        SELECT (SELECT max(priority) FROM jobs WHERE state = 'queued' AND priority < p)
        FROM priorities WHERE p IS NOT NULL
    )
    SELECT head.seq, head.priority, head.created_at
    FROM priorities JOIN jobs AS head ON head.seq IN (
        SELECT seq FROM jobs
        WHERE state = 'queued' AND priority = priorities.p AND gpus <= :max_gpus
            AND NOT blocked
        ORDER BY seq LIMIT :limit
    )
    """
).columns(seq=Integer, priority=Integer, created_at=UTCDateTime())
