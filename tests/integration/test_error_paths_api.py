"""Through the HTTP API with the real runtime, on the CPU: refused imports (problem JSON) and a
failed job (its error) name no absolute path of the server, even where they repeat what
ultralytics or the OS said about its files."""

from __future__ import annotations

import datetime
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest

from tests.conftest import serve, wait_terminal
from tests.support.problems import assert_no_server_path, assert_problem
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.testing.training import make_dataset
from yolo_orch.testing.yolo import build_checkpoint, ensure_ultralytics


@pytest.fixture
async def client(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    settings_factory: Callable[..., Settings],
) -> AsyncIterator[httpx.AsyncClient]:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    data, weights = tmp_path / "data", tmp_path / "weights"
    build_checkpoint(weights / "tiny.pt")
    settings = settings_factory(
        runtime="auto", database_url="", data_roots=[data], model_roots=[weights]
    )
    async with serve(create_app(settings)) as client:
        yield client


async def test_refused_imports_name_the_clients_files_not_the_servers(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    import torch

    weights = tmp_path / "weights"
    # ultralytics' loader names the file it was given: the server's staged copy
    torch.save({"model": datetime.date(2020, 1, 1)}, weights / "alien.pt")
    assert (await client.post("/v1/models", json={"path": "tiny.pt"})).status_code == 201
    folder = weights / "linked_openvino_model"
    folder.mkdir()
    (folder / "model.xml").write_text("<net/>")
    (folder / "model.bin").symlink_to(weights / "tiny.pt")

    by_path = await client.post("/v1/models", json={"path": "alien.pt", "name": "mine"})
    upload = ("alien.pt", (weights / "alien.pt").read_bytes())
    uploaded = await client.post("/v1/models", files={"file": upload}, data={"name": "theirs"})
    variant = await client.post("/v1/models/tiny/variants", json={"path": "linked_openvino_model"})

    for response, code in ((by_path, "invalid_weights"), (uploaded, "invalid_weights")):
        assert_problem(response, 422, code)
        assert "references types outside" in response.json()["detail"]
    assert "ERROR ❌️ mine references" in by_path.json()["detail"]
    assert "ERROR ❌️ theirs references" in uploaded.json()["detail"]
    assert_problem(variant, 422, "invalid_variant")
    assert "model.bin' " in variant.json()["detail"]
    assert "is not a regular file" in variant.json()["detail"]
    for response in (by_path, uploaded, variant):
        assert_no_server_path(response.text, tmp_path)


async def test_a_failed_jobs_error_repeats_ultralytics_without_the_servers_paths(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    dataset = tmp_path / "data" / "hollow"
    make_dataset(dataset, n_train=1, n_val=1, size=32)
    for folder in ("images", "labels"):  # a val split that holds nothing for ultralytics to read
        shutil.rmtree(dataset / folder / "val")
        (dataset / folder / "val").mkdir()
    assert (await client.post("/v1/models", json={"path": "tiny.pt"})).status_code == 201

    job = {"kind": "validation", "model": "tiny", "dataset": "hollow/data.yaml"}
    response = await client.post("/v1/jobs", json={**job, "params": {"imgsz": 32}})
    assert response.status_code == 202, response.text
    done = await wait_terminal(client, response.json()["id"], deadline_s=60)

    assert done["state"] == "failed", done
    assert "hollow/images/val" in done["error"]["message"]  # under its data root
    assert_no_server_path(done["error"]["message"], tmp_path)
    logged = (await client.get(f"/v1/jobs/{done['id']}/logs")).text
    failed = next(line for line in logged.splitlines() if "failed: " in line)
    assert_no_server_path(failed, tmp_path)
