"""The disk guard: below `min_free_bytes` submissions and uploads get 507 and store nothing,
readiness says degraded; a job that meets a full disk fails `disk_full` and the server goes on.
Free space comes from an injected probe, and once from a real, small tmpfs."""

from __future__ import annotations

import asyncio
import errno
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import httpx
import pytest
from fastapi import FastAPI

from tests.conftest import serve, sim_job, wait_terminal
from tests.support.problems import assert_problem, wait_state
from yolo_orch.api.deps import Services
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.runners.failures import failure_of

MIN_FREE = 1 << 20
IMAGE = ("images", ("a.jpg", b"x", "image/jpeg"))


class Disks:
    """A free-space probe: plenty everywhere except under the folders made `full`."""

    def __init__(self) -> None:
        self.full: set[Path] = set()

    def __call__(self, path: Path) -> int:
        return 0 if any(path.resolve().is_relative_to(f) for f in self.full) else 1 << 40


async def _look_again(app: FastAPI) -> None:
    """What the guard's refresher does every `disk_check_interval_s`, now."""
    services: Services = app.state.services
    await services.disk.check()


def _files(folder: Path) -> set[Path]:
    return {path for path in folder.rglob("*") if path.is_file()}


def _entries(folder: Path) -> set[Path]:
    return set(folder.iterdir()) if folder.exists() else set()


async def _refused_everything(client: httpx.AsyncClient, jobs_dir: Path) -> None:
    before = _entries(jobs_dir)
    assert_problem(await client.post("/v1/jobs", json=sim_job()), 507, "insufficient_storage")
    upload = await client.post("/v1/jobs/inference", data={"model": "sim"}, files=[IMAGE])
    body = assert_problem(upload, 507, "insufficient_storage")
    assert "bytes free" in body["detail"]
    assert "/" not in body["detail"]
    weights = await client.post("/v1/models", files={"file": ("w.pt", b"w" * 100)})
    assert_problem(weights, 507, "insufficient_storage")
    assert _entries(jobs_dir) == before
    assert (await client.get("/v1/jobs")).json()["jobs"] == []
    assert (await client.get("/v1/models")).json()["models"] == []
    ready = (await client.get("/readyz")).json()
    assert ready["status"] == "degraded"
    assert ready["checks"]["disk_space_ok"] is False


async def test_a_full_data_dir_refuses_submissions_and_uploads(
    settings_factory: Callable[..., Settings],
) -> None:
    settings = settings_factory(min_free_bytes=MIN_FREE)
    disks = Disks()
    app = create_app(settings, free_space=disks)
    async with serve(app) as client:
        assert (await client.get("/readyz")).json()["checks"]["disk_space_ok"] is True
        disks.full.add(settings.data_dir.resolve())
        await _look_again(app)

        await _refused_everything(client, settings.jobs_dir)

        disks.full.clear()
        await _look_again(app)
        assert (await client.post("/v1/jobs", json=sim_job())).status_code == 202
        assert (await client.get("/readyz")).json()["status"] == "ready"
        assert (await client.get("/healthz")).status_code == 200


async def test_the_database_elsewhere_is_checked_on_its_own(
    settings_factory: Callable[..., Settings], tmp_path: Path
) -> None:
    database = tmp_path / "elsewhere" / "jobs.db"
    database.parent.mkdir()
    settings = settings_factory(
        min_free_bytes=MIN_FREE, database_url=f"sqlite+aiosqlite:///{database}"
    )
    disks = Disks()
    disks.full.add(database.parent.resolve())
    async with serve(create_app(settings, free_space=disks)) as client:
        await _refused_everything(client, settings.jobs_dir)
        detail = (await client.post("/v1/jobs", json=sim_job())).json()["detail"]
        assert "database: 0 bytes free" in detail
        assert "data_dir" not in detail


async def test_submissions_see_a_disk_fill_up_within_the_check_interval(
    settings_factory: Callable[..., Settings],
) -> None:
    settings = settings_factory(min_free_bytes=MIN_FREE, disk_check_interval_s=0.05)
    disks = Disks()
    async with serve(create_app(settings, free_space=disks)) as client:
        assert (await client.post("/v1/jobs", json=sim_job())).status_code == 202
        disks.full.add(settings.data_dir.resolve())
        deadline = time.monotonic() + 30
        while (response := await client.post("/v1/jobs", json=sim_job())).status_code == 202:
            assert time.monotonic() < deadline, "the refresher never looked again"
            await asyncio.sleep(0.02)
        assert_problem(response, 507, "insufficient_storage")


async def test_no_check_at_zero(settings_factory: Callable[..., Settings]) -> None:
    settings = settings_factory(min_free_bytes=0)
    async with serve(create_app(settings, free_space=lambda path: 0)) as client:
        assert (await client.post("/v1/jobs", json=sim_job())).status_code == 202
        assert (await client.get("/readyz")).json()["checks"]["disk_space_ok"] is True


def test_enospc_is_disk_full_also_when_wrapped() -> None:
    full = OSError(errno.ENOSPC, "No space left on device")
    wrapped = RuntimeError("checkpoint write failed")
    wrapped.__cause__ = full
    said = RuntimeError(
        "[enforce fail at inline_container.cc:603] . PytorchStreamWriter failed "
        "writing file data/0: file write failed: No space left on device"
    )
    for exc in (full, wrapped, said):
        assert failure_of(exc).code == "disk_full", exc
    assert failure_of(OSError(errno.EIO, "I/O error")).code == "runtime_error"


# -- a real full disk


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs; skipped where mounting is not allowed (not root, no CAP_SYS_ADMIN)."""
    mount_point = tmp_path / "small-disk"
    mount_point.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount_point)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _fill(folder: Path) -> Path:
    """Write until the file system says it is full."""
    filler = folder / "filler"
    # Unbuffered: a buffered file keeps what a short write left and fails again at its close.
    with filler.open("wb", buffering=0) as file:
        while _wrote(file):
            pass
    return filler


def _wrote(file: BinaryIO) -> bool:
    try:
        file.write(b"\0" * 65536)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
        return False
    return True


async def test_a_real_full_disk(
    small_disk: Path, settings_factory: Callable[..., Settings]
) -> None:
    settings = settings_factory(data_dir=small_disk, min_free_bytes=1 << 20, sim_lanes=1)
    app = create_app(settings)
    async with serve(app) as client:
        long = sim_job(params={"sim_seconds": 1.5, "sim_steps": 30})
        running = (await client.post("/v1/jobs", json=long)).json()["id"]
        await wait_state(client, running, "running")

        filler = _fill(small_disk)
        await _look_again(app)

        failed = await wait_terminal(client, running)
        assert failed["state"] == "failed"
        assert failed["error"]["code"] == "disk_full", failed["error"]
        assert (await client.get("/healthz")).status_code == 200
        await _refused_everything_but_jobs(client, settings.jobs_dir)

        filler.unlink()
        await _look_again(app)
        again = (await client.post("/v1/jobs", json=sim_job())).json()["id"]
        assert (await wait_terminal(client, again))["state"] == "succeeded"
        assert (await client.get("/readyz")).json()["status"] == "ready"


async def _refused_everything_but_jobs(client: httpx.AsyncClient, jobs_dir: Path) -> None:
    """As `_refused_everything`, with the one failed job listed."""
    before = _entries(jobs_dir)
    assert_problem(await client.post("/v1/jobs", json=sim_job()), 507, "insufficient_storage")
    upload = await client.post("/v1/jobs/inference", data={"model": "sim"}, files=[IMAGE])
    assert_problem(upload, 507, "insufficient_storage")
    assert _entries(jobs_dir) == before
    assert len((await client.get("/v1/jobs")).json()["jobs"]) == 1
    assert (await client.get("/readyz")).json()["checks"]["disk_space_ok"] is False


async def test_uploads_that_fill_the_disk_are_refused_and_leave_nothing(
    small_disk: Path, settings_factory: Callable[..., Settings]
) -> None:
    settings = settings_factory(data_dir=small_disk, min_free_bytes=0, sim_lanes=1)
    async with serve(create_app(settings)) as client:
        before = _entries(settings.jobs_dir)
        filler = _fill(small_disk)
        filler.write_bytes(filler.read_bytes()[: -(256 << 10)])  # 256 KiB left
        big = ("images", ("big.jpg", b"\xff" * (1 << 20), "image/jpeg"))

        response = await client.post("/v1/jobs/inference", data={"model": "sim"}, files=[big])

        body = assert_problem(response, 507, "insufficient_storage")
        assert "filled up" in body["detail"]
        assert _entries(settings.jobs_dir) == before
        files = _files(small_disk)
        weights = await client.post("/v1/models", files={"file": ("w.pt", b"w" * (1 << 20))})
        detail = assert_problem(weights, 507, "insufficient_storage")["detail"]
        assert "filled up" in detail
        assert "/" not in detail
        assert _files(small_disk) == files  # nothing staged is left
        assert (await client.get("/v1/models")).json()["models"] == []
        filler.unlink()
        again = await client.post("/v1/jobs/inference", data={"model": "sim"}, files=[IMAGE])
        assert again.status_code == 202, again.text
