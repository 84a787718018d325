"""Deleting finished jobs, expiring them in the background, and sweeping what a crash left."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.conftest import serve, sim_job, wait_terminal
from tests.support.problems import assert_problem, wait_state
from yolo_orch.app import create_app
from yolo_orch.config import Settings

OLD = time.time() - 7200


async def _finished(client: httpx.AsyncClient, **params: object) -> str:
    job_id: str = (await client.post("/v1/jobs", json=sim_job(params=params))).json()["id"]
    await wait_terminal(client, job_id)
    return job_id


async def _job_ids(client: httpx.AsyncClient) -> set[str]:
    return {job["id"] for job in (await client.get("/v1/jobs")).json()["jobs"]}


async def test_delete_removes_a_finished_job_and_its_files(
    settings_factory: Callable[..., Settings],
) -> None:
    settings = settings_factory(sim_lanes=1)
    async with serve(create_app(settings)) as client:
        done = await _finished(client)
        folder = settings.jobs_dir / done
        assert (folder / "job.log").is_file()
        slow = sim_job(params={"sim_seconds": 20, "sim_steps": 400})
        running = (await client.post("/v1/jobs", json=slow)).json()["id"]
        queued = (await client.post("/v1/jobs", json=slow)).json()["id"]
        await wait_state(client, running, "running")

        response = await client.delete(f"/v1/jobs/{done}")

        assert response.status_code == 204
        assert_problem(await client.get(f"/v1/jobs/{done}"), 404, "job_not_found")
        assert not folder.exists()
        for active in (running, queued):
            assert_problem(await client.delete(f"/v1/jobs/{active}"), 409, "job_active")
            assert (await client.get(f"/v1/jobs/{active}")).status_code == 200
        assert_problem(await client.delete(f"/v1/jobs/{done}"), 404, "job_not_found")
        metrics = (await client.get("/metrics")).text
        assert 'yolo_orch_removed_jobs_total{reason="deleted"} 1.0' in metrics
        assert 'yolo_orch_removed_bytes_total{reason="deleted"} 0.0' not in metrics
        for job_id in (queued, running):
            await client.post(f"/v1/jobs/{job_id}/cancel")


async def test_delete_needs_the_admin_scope(settings_factory: Callable[..., Settings]) -> None:
    tokens = [
        {
            "name": name,
            "sha256": hashlib.sha256(f"{name}-token".encode()).hexdigest(),
            "scope": name,
        }
        for name in ("jobs", "admin")
    ]
    async with serve(create_app(settings_factory(tokens=tokens))) as client:
        client.headers["Authorization"] = "Bearer jobs-token"
        job_id = (await client.post("/v1/jobs", json=sim_job())).json()["id"]
        await wait_terminal(client, job_id)
        assert_problem(await client.delete(f"/v1/jobs/{job_id}"), 403, "forbidden")
        admin = {"Authorization": "Bearer admin-token"}
        assert (await client.delete(f"/v1/jobs/{job_id}", headers=admin)).status_code == 204


async def test_finished_jobs_beyond_max_finished_jobs_expire_in_the_background(
    settings_factory: Callable[..., Settings],
) -> None:
    settings = settings_factory(max_finished_jobs=2, retention_interval_s=0.05)
    async with serve(create_app(settings)) as client:
        jobs = [await _finished(client) for _ in range(5)]

        counted = 'yolo_orch_removed_jobs_total{reason="expired"} 3.0'
        async with asyncio.timeout(10):  # records go first, then folders, then the count
            while counted not in (await client.get("/metrics")).text:
                await asyncio.sleep(0.05)

        assert await _job_ids(client) == set(jobs[-2:])
        for job_id in jobs[:3]:
            assert not (settings.jobs_dir / job_id).exists()


def _file(path: Path, size: int, *, aged: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    return _aged(path) if aged else path


def _aged(path: Path) -> Path:
    os.utime(path, (OLD, OLD))
    return path


async def test_orphaned_uploads_and_stale_temporary_files_are_swept_at_start(
    settings_factory: Callable[..., Settings],
) -> None:
    settings = settings_factory(orphan_grace_s=3600)
    jobs_dir, models_dir = settings.jobs_dir, settings.models_dir
    _file(jobs_dir / "orphan" / "inputs" / "00000.jpg", 1000)
    _aged(jobs_dir / "orphan")
    _file(jobs_dir / "uploading" / "inputs" / "00000.jpg", 10, aged=False)  # in progress
    staged_variant = models_dir / "variants" / ".incoming-4567"
    stale = [
        _file(models_dir / ".incoming-0123.pt", 500),
        _file(models_dir / ".model.pt.abc.tmp", 1),
        _aged(_file(staged_variant / "model.onnx", 0).parent),
    ]
    young_tmp = _file(models_dir / ".other.pt.def.tmp", 1, aged=False)
    kept = _file(models_dir / "kept.pt", 1)

    async with serve(create_app(settings)) as client:
        async with asyncio.timeout(10):
            while (jobs_dir / "orphan").exists() or any(path.exists() for path in stale):
                await asyncio.sleep(0.02)
        metrics = (await client.get("/metrics")).text

    assert (jobs_dir / "uploading").is_dir()
    assert young_tmp.is_file()
    assert kept.is_file()
    assert 'yolo_orch_removed_bytes_total{reason="orphaned"} 1000.0' in metrics
    assert 'yolo_orch_removed_bytes_total{reason="temporary"} 501.0' in metrics


async def test_a_line_still_queued_for_a_deleted_job_does_not_make_its_folder_again(
    settings_factory: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("yolo_orch.ops.logs.BATCH_S", 30.0)  # lines wait in the queue until settled
    settings = settings_factory(sim_lanes=1)
    async with serve(create_app(settings)) as client:
        done, other = await _finished(client), await _finished(client)
        logging.getLogger("yolo_orch.test").info("late line", extra={"job_id": done})

        assert (await client.delete(f"/v1/jobs/{done}")).status_code == 204
        assert "succeeded" in (await client.get(f"/v1/jobs/{other}/logs")).text  # settles
        assert not (settings.jobs_dir / done).exists()


async def test_a_known_jobs_folder_is_not_an_orphan(
    settings_factory: Callable[..., Settings],
) -> None:
    settings = settings_factory(retention_interval_s=0.05)
    async with serve(create_app(settings)) as client:
        job_id = await _finished(client)
        _aged(settings.jobs_dir / job_id)
        await asyncio.sleep(0.3)  # several sweeps
        assert (settings.jobs_dir / job_id / "job.log").is_file()


async def test_an_upload_still_in_flight_past_the_grace_is_not_an_orphan(
    settings_factory: Callable[..., Settings],
) -> None:
    """The request's images are in the job's folder, which is older than `orphan_grace_s`, and
    its job is not committed yet: sweeps leave the folder, and the job then runs on its files."""
    settings = settings_factory(orphan_grace_s=3600)
    app = create_app(settings)
    async with serve(app) as client:
        services = app.state.services
        store, create = services.store, services.store.create
        held, go = asyncio.Event(), asyncio.Event()

        async def slow_create(*args: object, **kwargs: object) -> object:
            held.set()
            await go.wait()
            return await create(*args, **kwargs)

        store.create = slow_create
        upload = asyncio.create_task(
            client.post(
                "/v1/jobs/inference",
                data={"model": "sim", "params": '{"sim_seconds": 0.01}'},
                files=[("images", ("a.jpg", b"x" * 100, "image/jpeg"))],
            )
        )
        await held.wait()
        (folder,) = settings.jobs_dir.iterdir()
        _aged(folder)
        assert await services.retention.sweep() == (0, 0)
        assert (folder / "inputs" / "00000.jpg").is_file()

        go.set()
        response = await upload
        assert response.status_code == 202
        assert response.json()["id"] == folder.name
        assert (await wait_terminal(client, folder.name))["state"] == "succeeded"
        assert services.files.filling() == frozenset()
        store.create = create

        _file(settings.jobs_dir / "crashed" / "inputs" / "00000.jpg", 10)
        _aged(settings.jobs_dir / "crashed")
        assert await services.retention.sweep() == (1, 10)  # only the true orphan
        assert (folder / "inputs" / "00000.jpg").is_file()


async def test_a_refused_upload_lets_go_of_its_folder(
    settings_factory: Callable[..., Settings],
) -> None:
    settings = settings_factory()
    app = create_app(settings)
    async with serve(app) as client:
        image = ("images", ("a.jpg", b"x", "image/jpeg"))
        unknown = await client.post("/v1/jobs/inference", data={"model": "yolo11n"}, files=[image])
        assert_problem(unknown, 404, "model_not_found")
        draining = app.state.services.jobs
        draining.draining = True
        refused = await client.post("/v1/jobs/inference", data={"model": "sim"}, files=[image])
        assert refused.status_code == 503
        draining.draining = False

        assert app.state.services.files.filling() == frozenset()
        known = await _job_ids(client)
        assert {folder.name for folder in settings.jobs_dir.iterdir()} <= known
