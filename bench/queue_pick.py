"""The dispatcher's pick of the next jobs on a long history: `next_queued` as the dispatcher
asks it (aging on, the lane filter) against the plain priority read, in this process.

    python -m bench.queue_pick [--finished 1000000] [--queued 20000] [--window 10]

The database is built by `bench.history` (its schema, its rows); then every queued job is
given one of the 201 priorities, the worst case for the aged pick, which reads the head of each
priority queued.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from bench._server import percentile
from bench.history import build_database
from yolo_orch.domain import QueueOrder
from yolo_orch.ops.clock import utcnow
from yolo_orch.store.sqlite import SQLiteJobStore
from yolo_orch.store.sqlite_db import SQLiteDatabase

REPEATS = 50
SPREAD_PRIORITIES = "UPDATE jobs SET priority = seq % 201 - 100 WHERE state = 'queued'"


async def pick_ms(path: Path, window: int, order: QueueOrder | None) -> tuple[float, float]:
    db = SQLiteDatabase(f"sqlite+aiosqlite:///{path}")
    await db.open()
    try:
        store = SQLiteJobStore(db)
        samples = []
        for _ in range(REPEATS):
            started = time.perf_counter()
            await store.next_queued(window, order)
            samples.append((time.perf_counter() - started) * 1000)
    finally:
        await db.close()
    return statistics.median(samples), percentile(samples, 0.95)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--finished", type=int, default=1_000_000)
    parser.add_argument("--queued", type=int, default=20_000)
    parser.add_argument("--window", type=int, default=10)
    args = parser.parse_args()
    orders = {
        "plain (priority, seq)": None,
        "aging off, lane filter": QueueOrder(utcnow(), 0.0, max_gpus=2),
        "aging 1/min, lane filter": QueueOrder(utcnow(), 1.0, max_gpus=2),
    }
    with tempfile.TemporaryDirectory(prefix="yolo-orch-pick-") as tmp:
        data_dir = Path(tmp) / "var"
        build_database(data_dir, finished=args.finished, queued=args.queued)
        path = data_dir / "yolo-orch.db"
        print(f"{args.finished:,} finished, {args.queued:,} queued; next_queued({args.window})")
        print(f"{'priorities':>10} | {'pick':>26} | {'p50 ms':>7} | {'p95 ms':>7}")
        for spread in (False, True):
            if spread:
                with sqlite3.connect(path) as conn:
                    conn.execute(
                        "UPDATE jobs SET priority = seq % 201 - 100 WHERE state = 'queued'"
                    )
            for name, order in orders.items():
                p50, p95 = asyncio.run(pick_ms(path, args.window, order))
                label = "201" if spread else "1"
                print(f"{label:>10} | {name:>26} | {p50:>7.2f} | {p95:>7.2f}")


if __name__ == "__main__":
    main()
