"""Messages that reach a client name the server's files by their path under their folder, never
by the server's absolute path: the helper, and a failed run's error as the dispatcher records
it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from tests.test_admission import ScriptedExecutor
from yolo_orch.admission import Lanes
from yolo_orch.clock import utcnow
from yolo_orch.config import Settings
from yolo_orch.dispatcher import Dispatcher
from yolo_orch.domain import JobKind, JobResult, NewJob
from yolo_orch.jobfiles import JobFiles
from yolo_orch.runners.base import RunContext
from yolo_orch.shown_paths import ShownPaths, server_paths
from yolo_orch.store.memory import InMemoryJobStore


def assert_no_server_path(text: str, tmp_path: Path) -> None:
    for form in {str(tmp_path), os.path.realpath(tmp_path)}:
        assert form not in text, text


def test_paths_under_a_known_folder_are_named_from_it() -> None:
    shown = ShownPaths([Path("/srv/data"), Path("/srv/data/var")], {Path("/srv/m/up.pt"): "mine"})

    assert shown.text("missing path '/srv/data/ds/images/val'") == "missing path 'ds/images/val'"
    assert shown.text("no /srv/data/var/jobs/1/best.pt") == "no jobs/1/best.pt"  # the inner one
    assert shown.text("ERROR /srv/m/up.pt is no model") == "ERROR mine is no model"
    assert shown.text("PosixPath('/srv/data')") == "PosixPath('.')"
    assert shown.text("/srv/data2/x.jpg is not /srv/data") == "…/x.jpg is not ."


def test_a_folder_is_known_by_its_real_path_too(tmp_path: Path) -> None:
    real = tmp_path / "real"
    (real / "ds").mkdir(parents=True)
    (tmp_path / "link").symlink_to(real)
    shown = ShownPaths([tmp_path / "link"])

    assert shown.text(f"cannot read {real / 'ds' / 'a.jpg'}") == "cannot read ds/a.jpg"
    assert shown.text(f"cannot read {tmp_path / 'link' / 'ds'}") == "cannot read ds"


def test_other_absolute_paths_keep_their_last_part_and_the_rest_of_the_message_stays() -> None:
    shown = ShownPaths()
    message = (
        "[Errno 2] No such file or directory: '/opt/x/weights.pt' (see "
        "https://docs.ultralytics.com/datasets/detect/, 1/2 done, N/A, ~/notes/a.txt, /tmp)"
    )
    assert shown.text(message) == (
        "[Errno 2] No such file or directory: '…/weights.pt' (see "
        "https://docs.ultralytics.com/datasets/detect/, 1/2 done, N/A, ~/notes/a.txt, /tmp)"
    )
    assert shown.text(shown.text(message)) == shown.text(message)


def test_the_servers_folders_are_data_dir_and_every_root(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path / "var",
        data_roots=[tmp_path / "data"],
        model_roots=[tmp_path / "weights"],
        shared_data_roots=[tmp_path / "shared"],
        ray_node_cache_dir=tmp_path / "cache",
    )
    message = " ".join(
        str(tmp_path / part)
        for part in ("var/models/a.pt", "data/ds/x.jpg", "weights/w.pt", "shared/s", "cache/n/c.pt")
    )
    assert server_paths(settings).text(message) == "models/a.pt ds/x.jpg w.pt s n/c.pt"


async def test_a_failed_runs_error_names_the_servers_files_from_their_folders(
    tmp_path: Path,
) -> None:
    settings = Settings(data_dir=tmp_path / "var", data_roots=[tmp_path / "data"])
    files = JobFiles(settings.jobs_dir)

    async def fails(ctx: RunContext) -> JobResult:
        missing = tmp_path / "data" / "ds" / "images" / "val"
        raise FileNotFoundError(f"no images in {missing}, nor in {ctx.workdir / 'a'} or /opt/b/c")

    for shown, expected in [
        (server_paths(settings), "no images in ds/images/val, nor in jobs/{id}/a or …/c"),
        (None, "no images in …/val, nor in …/a or …/c"),
    ]:
        store = InMemoryJobStore()
        dispatcher = Dispatcher(
            store, Lanes(["sim:0"], 1), ScriptedExecutor(1, fails), files, shown_paths=shown
        )
        task = asyncio.create_task(dispatcher.run())
        new = NewJob(kind=JobKind.INFERENCE, model="sim", spec={"params": {}})
        job, _ = await store.create(new, max_queued=10, now=utcnow())
        dispatcher.wake()
        async with asyncio.timeout(10):
            while not (job := await store.get(job.id)).state.is_terminal:
                await asyncio.sleep(0.005)
        await dispatcher.drain(grace_s=1)
        await task

        assert job.error is not None
        assert job.error.message == f"FileNotFoundError: {expected.format(id=job.id)}"
