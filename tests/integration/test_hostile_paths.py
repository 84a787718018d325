"""Hostile paths: file-system errors are the client's 422s, request file work cannot starve (or
be starved by) the jobs and /readyz says when its threads are all busy, and an inference input
swapped for a symlink out of the data roots after submission is never read."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import serve, sim_job, wait_terminal
from tests.support.problems import assert_problem
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.domain import JobResult
from yolo_orch.errors import InvalidJobInput
from yolo_orch.files.inputs import open_contained
from yolo_orch.files.jobfiles import JobFiles
from yolo_orch.registry.weights import ResolvedWeights, sha256_file
from yolo_orch.runners.inference import YoloInferenceRunner
from yolo_orch.testing.yolo import (
    RecordingContext,
    build_checkpoint,
    ensure_ultralytics,
    fixed_resolver,
    make_images,
)

LONG_NAME = "x" * 300

# --- open_contained: the check where the file is opened ---


def read_contained(path: Path, roots: list[Path]) -> bytes:
    with open_contained(path, roots) as file:
        return file.read()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    (root / "shots").mkdir(parents=True)
    (root / "shots" / "a.jpg").write_bytes(b"inside")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.jpg").write_bytes(b"secret")
    return root


def test_a_file_inside_the_roots_is_read(data: Path) -> None:
    assert read_contained(data / "shots" / "a.jpg", [data]) == b"inside"
    (data / "alias.jpg").symlink_to(data / "shots" / "a.jpg")  # a link within the roots
    assert read_contained(data / "alias.jpg", [data]) == b"inside"


def test_a_file_swapped_for_a_symlink_out_is_refused(data: Path, tmp_path: Path) -> None:
    path = data / "shots" / "a.jpg"
    path.unlink()
    path.symlink_to(tmp_path / "outside" / "secret.jpg")

    with pytest.raises(InvalidJobInput, match="outside the data roots"):
        read_contained(path, [data])


def test_a_folder_swapped_for_a_symlink_out_is_refused(data: Path, tmp_path: Path) -> None:
    (data / "shots" / "a.jpg").unlink()
    (data / "shots").rmdir()
    (data / "shots").symlink_to(tmp_path / "outside")
    (tmp_path / "outside" / "a.jpg").write_bytes(b"secret")

    with pytest.raises(InvalidJobInput, match="outside the data roots"):
        read_contained(data / "shots" / "a.jpg", [data])


def test_a_swap_after_the_check_is_caught_where_the_file_is_opened(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The swap lands between resolving the path and opening it: resolving sees the path as it
    was (realpath returns it unchanged)."""
    (data / "leaf.jpg").symlink_to(tmp_path / "outside" / "secret.jpg")
    (data / "folder").symlink_to(tmp_path / "outside")
    monkeypatch.setattr(os.path, "realpath", lambda path, **_: os.fspath(path))

    with pytest.raises(InvalidJobInput, match="symbolic link"):  # O_NOFOLLOW on the last name
        read_contained(data / "leaf.jpg", [data])
    with pytest.raises(InvalidJobInput, match="outside the data roots"):  # the opened file's path
        read_contained(data / "folder" / "secret.jpg", [data])


def test_a_fifo_is_refused_without_blocking(data: Path) -> None:
    fifo = data / "shots" / "fifo.jpg"
    os.mkfifo(fifo)  # opening it for reading would wait for a writer

    with pytest.raises(InvalidJobInput, match="not a regular file"):
        read_contained(fifo, [data])


# --- the same through the real inference runner ---


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> ResolvedWeights:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    path = build_checkpoint(tmp_path_factory.mktemp("weights") / "tiny.pt")
    return ResolvedWeights(path, sha256_file(path))


def test_an_input_swapped_out_of_the_roots_after_submission_is_an_error_entry(
    weights: ResolvedWeights, tmp_path: Path
) -> None:
    data, outside = tmp_path / "data", tmp_path / "outside"
    images = make_images(data, 2)
    [secret] = make_images(outside, 1, seed=1)
    workdir = tmp_path / "job"
    uploaded = workdir / "inputs" / "00000.jpg"  # the job's own uploads are readable too
    uploaded.parent.mkdir(parents=True)
    uploaded.write_bytes(images[0].read_bytes())
    ctx = RecordingContext().context(workdir, [*images, uploaded], imgsz=64, save_annotated=True)
    images[1].unlink()  # a regular file at submission, a symlink out of the roots now
    images[1].symlink_to(secret)
    runner = YoloInferenceRunner(fixed_resolver({"tiny": weights}), data_roots=[data])

    result = runner.run(ctx)

    entries = result.detail["images"]
    assert entries[1] == {
        "source": "img1.jpg",
        "error": "refused: the file now leads outside the data roots",
    }
    assert "detections" in entries[0]
    assert "detections" in entries[2]
    assert result.summary["failed_images"] == 1
    artifacts = sorted(path.name for path in (workdir / "artifacts").iterdir())
    assert artifacts == ["00000_img0.jpg", "00002_00000.jpg"]  # nothing made of the secret


def test_an_input_swapped_for_a_fifo_or_a_link_to_a_non_image_out_is_refused_unread(
    weights: ResolvedWeights, tmp_path: Path
) -> None:
    """Nothing reads the swapped name before the check where it is opened, not even the header
    check: a FIFO would block the lane for good, and a header read outside the roots would tell
    the client what lies there."""
    data, outside = tmp_path / "data", tmp_path / "outside"
    images = make_images(data, 3)
    outside.mkdir()
    (outside / "passwd").write_text("root:x:0:0\n")
    ctx = RecordingContext().context(tmp_path / "job", images, imgsz=64)
    images[1].unlink()
    images[1].symlink_to(outside / "passwd")
    images[2].unlink()
    os.mkfifo(images[2])  # opened for reading, it would wait for a writer
    runner = YoloInferenceRunner(fixed_resolver({"tiny": weights}), data_roots=[data])
    ran: list[JobResult] = []
    thread = threading.Thread(target=lambda: ran.append(runner.run(ctx)), daemon=True)

    thread.start()
    thread.join(60)

    if thread.is_alive():  # let the blocked open go before failing
        os.close(os.open(images[2], os.O_WRONLY | os.O_NONBLOCK))
    assert ran, "the run blocked on the FIFO"
    entries = ran[0].detail["images"]
    assert "detections" in entries[0]
    assert entries[1]["error"] == "refused: the file now leads outside the data roots"
    assert entries[2]["error"] == "refused: not a regular file"


# --- through the API: 422 with a code, never a 500 ---


@pytest.fixture
async def host(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    settings_factory: Callable[..., Settings],
) -> AsyncIterator[httpx.AsyncClient]:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    data, model_root = tmp_path / "data", tmp_path / "weights"
    make_images(data / "shots", 1)
    for index in range(40):
        (data / "many" / f"{index:02d}.txt").parent.mkdir(parents=True, exist_ok=True)
        (data / "many" / f"{index:02d}.txt").write_bytes(b"x")
    (data / "loop").symlink_to("loop")
    build_checkpoint(model_root / "tiny.pt")
    (model_root / "loop.pt").symlink_to("loop.pt")
    settings = settings_factory(
        runtime="auto",
        data_roots=[data],
        model_roots=[model_root],
        max_walk_entries=30,
    )
    async with serve(create_app(settings)) as client:
        response = await client.post("/v1/models", json={"path": "tiny.pt"})
        assert response.status_code == 201, response.text
        yield client


@pytest.mark.parametrize(
    ("inputs", "code"),
    [
        ([LONG_NAME + ".jpg"], "path_too_long"),
        ([f"shots/{LONG_NAME}/*.jpg"], "path_too_long"),
        (["loop/a.jpg"], "path_symlink_loop"),
        (["shots/img0.jpg/a.jpg"], "path_not_a_directory"),
        (["many/**/*.jpg"], "input_walk_too_large"),
    ],
)
async def test_hostile_inputs_get_422_with_a_code(
    host: httpx.AsyncClient, inputs: list[str], code: str
) -> None:
    job = {"kind": "inference", "model": "tiny", "inputs": inputs}

    problem = assert_problem(await host.post("/v1/jobs", json=job), 422, code)

    assert len(problem["detail"]) < 400  # the name is shown, shortened
    assert (await host.get("/v1/jobs")).json()["jobs"] == []
    assert (await host.get("/healthz")).status_code == 200  # the connection still serves


@pytest.mark.parametrize(
    ("path", "code"),
    [
        (LONG_NAME + ".pt", "path_too_long"),
        ("loop.pt", "path_symlink_loop"),
        ("tiny.pt/other.pt", "path_not_a_directory"),
    ],
)
async def test_hostile_model_import_paths_get_422_with_a_code(
    host: httpx.AsyncClient, path: str, code: str
) -> None:
    assert_problem(await host.post("/v1/models", json={"path": path}), 422, code)
    assert [m["name"] for m in (await host.get("/v1/models")).json()["models"]] == ["tiny"]


async def test_a_hostile_dataset_path_gets_422_with_a_code(host: httpx.AsyncClient) -> None:
    job = {
        "kind": "training",
        "model": "yolo11n.yaml",
        "dataset": f"{LONG_NAME}/data.yaml",
        "params": {"epochs": 1},
    }
    assert_problem(await host.post("/v1/jobs", json=job), 422, "path_too_long")


# --- the threads for request file work ---


async def test_readyz_is_degraded_while_the_file_threads_are_all_busy(
    settings_factory: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    real_read_log = JobFiles.read_log

    def blocked_read_log(self: JobFiles, job_id: str) -> bytes:
        if not release.wait(timeout=30):
            raise TimeoutError("the test never released the file threads")
        return real_read_log(self, job_id)

    monkeypatch.setattr(JobFiles, "read_log", blocked_read_log)
    app = create_app(settings_factory(request_file_threads=1))
    async with serve(app) as client:
        done = (await client.post("/v1/jobs", json=sim_job())).json()
        assert (await wait_terminal(client, done["id"]))["state"] == "succeeded"
        running = await client.post("/v1/jobs", json=sim_job(params={"sim_seconds": 0.3}))
        limiter = app.state.services.file_limiter
        readers = [asyncio.create_task(client.get(f"/v1/jobs/{done['id']}/logs")) for _ in range(2)]
        try:
            async with asyncio.timeout(10):
                while limiter.statistics().tasks_waiting == 0:  # one reads, one waits
                    await asyncio.sleep(0.01)
            busy: dict[str, Any] = (await client.get("/readyz")).json()
            # The jobs have threads of their own: one still runs to the end meanwhile.
            finished = await wait_terminal(client, running.json()["id"])
        finally:
            release.set()
        results = await asyncio.gather(*readers)

        assert busy["status"] == "degraded"
        assert busy["checks"]["file_workers_available"] is False
        assert finished["state"] == "succeeded"
        assert [r.status_code for r in results] == [200, 200]
        ready = (await client.get("/readyz")).json()
        assert ready["status"] == "ready"
        assert ready["checks"]["file_workers_available"] is True
