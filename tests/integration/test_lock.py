"""One server per data directory and per database."""

from __future__ import annotations

from pathlib import Path

import pytest

from yolo_orch.config import Settings
from yolo_orch.errors import InstanceLocked
from yolo_orch.ops.lock import InstanceLock


def test_a_second_holder_is_refused_until_the_first_lets_go(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "var")
    first, second = InstanceLock(settings.lock_files), InstanceLock(settings.lock_files)
    first.acquire()
    with pytest.raises(InstanceLocked, match="another yolo-orch server"):
        second.acquire()
    first.release()
    second.acquire()
    second.release()


def test_servers_with_other_data_dirs_on_one_database_exclude_each_other(tmp_path: Path) -> None:
    database = f"sqlite+aiosqlite:///{tmp_path / 'shared' / 'jobs.db'}"
    one = Settings(data_dir=tmp_path / "one", database_url=database)
    two = Settings(data_dir=tmp_path / "two", database_url=database)
    assert one.lock_files[1] == tmp_path / "shared" / "jobs.db.lock"
    first = InstanceLock(one.lock_files)
    first.acquire()
    with pytest.raises(InstanceLocked):
        InstanceLock(two.lock_files).acquire()
    assert not (tmp_path / "two" / "yolo-orch.lock").exists() or _free(two.lock_files[0])
    first.release()


def test_the_default_database_needs_only_the_data_dir_lock(tmp_path: Path) -> None:
    assert Settings(data_dir=tmp_path).lock_files == [tmp_path / "yolo-orch.lock"]


def _free(path: Path) -> bool:
    """The refused lock let go of what it had taken (all or none)."""
    lock = InstanceLock([path])
    lock.acquire()
    lock.release()
    return True
