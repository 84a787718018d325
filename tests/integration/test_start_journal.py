"""The journal of runs started on worker threads: what it keeps, what a crash may leave in it, and
when it is emptied."""

from __future__ import annotations

from pathlib import Path

from tests.support.start_journal import context
from yolo_orch.files.start_journal import TRIM_BYTES, Started, StartJournal


def test_what_was_noted_is_read_until_cleared_and_a_cut_line_is_skipped(tmp_path: Path) -> None:
    journal = StartJournal(tmp_path / "jobs" / ".started.jsonl")
    journal.note([context("a", 1), context("b", 2, ("sim:0", "sim:1"))])
    journal.close()
    with journal.path.open("ab") as file:
        file.write(b'{"job": "c", "attem')  # the crash came mid-write
    started = [Started("a", 1, ("sim:0",)), Started("b", 2, ("sim:0", "sim:1"))]
    assert StartJournal(journal.path).read() == started
    again = StartJournal(journal.path)
    assert again.read() == started  # until cleared: a crash before then finds it again
    again.clear()
    assert StartJournal(journal.path).read() == []
    never = StartJournal(tmp_path / "never-written")
    never.clear()
    assert never.read() == []


def test_trim_empties_the_journal_only_once_it_is_large(tmp_path: Path) -> None:
    journal = StartJournal(tmp_path / ".started.jsonl")
    journal.note([context("a", 1)])
    journal.trim()
    assert journal.path.stat().st_size > 0
    while journal.path.stat().st_size <= TRIM_BYTES:
        journal.note([context("a", 1)])
    journal.trim()
    assert journal.path.stat().st_size == 0
    journal.note([context("b", 1)])  # appends at the new end
    assert [entry.job_id for entry in journal.read()] == ["b"]
