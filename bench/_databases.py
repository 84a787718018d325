"""The store's engines for the benchmarks that measure both (`--database sqlite postgresql`):
SQLite in each server's data dir, or a fresh database on one throwaway PostgreSQL cluster
(Debian's `postgresql`, `initdb` in TMPDIR, fsync on, migrated by the server at start-up)."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Iterator, Sequence
from statistics import median

from yolo_orch.testing.postgres import PostgresCluster

ENGINES = ("sqlite", "postgresql")


def add_database_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument(
        "--database", nargs="+", choices=ENGINES, default=["sqlite"], help=help_text
    )


@contextlib.contextmanager
def database_urls(engines: Sequence[str]) -> Iterator[Callable[[str], str]]:
    """A function giving each run its store's URL: "" for SQLite (the server's data dir), a new
    database for PostgreSQL, on a cluster started here (only when `engines` name it)."""
    if "postgresql" not in engines:
        yield lambda engine: ""
        return
    cluster = PostgresCluster(fsync=True)  # durable, as SQLite's commits are here
    try:
        cluster.start()
        yield lambda engine: "" if engine == "sqlite" else cluster.new_database()
    finally:
        cluster.stop()


def print_ratio(rates: dict[str, list[float]], what: str) -> None:
    """With both engines measured, the ratio of their medians."""
    if all(rates.get(engine) for engine in ENGINES):
        ratio = median(rates["postgresql"]) / median(rates["sqlite"])
        print(f"{what}, median of the runs: PostgreSQL / SQLite {ratio:.2f}")
