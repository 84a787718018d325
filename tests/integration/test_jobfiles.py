"""Job folders: what they hold and when it is durable."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from yolo_orch.files.jobfiles import JobFiles, open_to_append, write_atomic


def _record_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """(st_dev, st_ino) of everything fsynced from now on; the real fsync still runs."""
    synced: list[tuple[int, int]] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        info = os.fstat(fd)
        synced.append((info.st_dev, info.st_ino))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


def _identity(path: Path) -> tuple[int, int]:
    info = path.stat()
    return info.st_dev, info.st_ino


def test_saved_inputs_and_their_folder_are_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced = _record_fsyncs(monkeypatch)
    jobfiles = JobFiles(tmp_path / "jobs")

    files, digests = jobfiles.save_inputs(
        "job-1", [("a.jpg", io.BytesIO(b"first")), ("dir\\b.PNG", io.BytesIO(b"second"))]
    )

    paths = [Path(entry["path"]) for entry in files]
    assert [entry["name"] for entry in files] == ["a.jpg", "b.PNG"]
    assert [path.read_bytes() for path in paths] == [b"first", b"second"]
    assert len(digests) == 2
    for path in paths:
        assert _identity(path) in synced, f"{path.name} was not fsynced"
    assert _identity(jobfiles.inputs_dir("job-1")) in synced, "the inputs folder was not fsynced"
    # The folder after its files: its entries name files whose data is already on disk.
    assert synced.index(_identity(jobfiles.inputs_dir("job-1"))) > max(
        synced.index(_identity(path)) for path in paths
    )


def test_an_upload_is_stored_with_a_plain_extension_only(tmp_path: Path) -> None:
    names = ["a.JPG", "b.p\x00ng", "c.mp4", "d.jpeg-long-extension", "e", ".hidden"]
    files, _ = JobFiles(tmp_path / "jobs").save_inputs(
        "job-1", [(name, io.BytesIO(b"x")) for name in names]
    )

    assert [Path(entry["path"]).name for entry in files] == [
        "00000.jpg",
        "00001",
        "00002.mp4",
        "00003",
        "00004",
        "00005",
    ]
    assert [entry["name"] for entry in files] == names


def test_write_atomic_still_fsyncs_the_file_and_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced = _record_fsyncs(monkeypatch)
    target = tmp_path / "out" / "result.json"

    write_atomic(target, b"{}")

    assert target.read_bytes() == b"{}"
    assert synced == [_identity(target), _identity(target.parent)]


def test_a_write_that_need_not_be_durable_replaces_the_file_whole_without_fsyncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced = _record_fsyncs(monkeypatch)
    target = tmp_path / "job" / "metrics.json"
    write_atomic(target, b"[1]", durable=False)
    write_atomic(target, b"[1, 2]", durable=False)
    assert target.read_bytes() == b"[1, 2]"
    assert [p.name for p in target.parent.iterdir()] == ["metrics.json"]  # no temporary left
    assert synced == []


def test_appending_makes_a_missing_folder_and_keeps_what_a_file_held(tmp_path: Path) -> None:
    log = tmp_path / "jobs" / "j1" / "job.log"
    with open_to_append(log) as file:  # neither the folder nor its parent is there
        file.write("one\n")
    with open_to_append(log) as file:
        file.write("two\n")
    assert log.read_text() == "one\ntwo\n"
