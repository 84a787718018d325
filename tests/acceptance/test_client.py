"""The Python client (`yolo_orch.client.Client`, `AsyncClient`) against a real server: `yolo-orch
serve` in a subprocess with the simulated runtime (its `sim` model), and a real checkpoint for
the registry's routes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.servers import module_server
from yolo_orch.client import ApiError, AsyncClient, Client, ExitCode, Job
from yolo_orch.client.shapes import (
    Devices,
    ExportResultDetail,
    Model,
    TrainingResultDetail,
    ValidationResultDetail,
)
from yolo_orch.domain.results import DetectImage
from yolo_orch.testing import Server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with module_server(tmp_path_factory, "client") as served:
        yield served


@pytest.fixture
def client(server: Server) -> Iterator[Client]:
    with Client(server.url, "") as opened:
        yield opened


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from yolo_orch.testing.yolo import build_checkpoint, ensure_ultralytics

    base = tmp_path_factory.mktemp("client-weights")
    ensure_ultralytics(base)
    return build_checkpoint(base / "tiny.pt")


def test_importing_the_client_imports_neither_the_server_nor_the_ml_stack() -> None:
    code = "import sys, json; from yolo_orch.client import Client, AsyncClient; " + (
        "print(json.dumps(sorted({m.partition('.')[0] for m in sys.modules})))"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    imported = set(json.loads(completed.stdout))
    assert imported.isdisjoint({"fastapi", "starlette", "torch", "ultralytics", "uvicorn"})
    server_modules = subprocess.run(
        [sys.executable, "-c", code.replace("m.partition('.')[0]", "m")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "yolo_orch.app" not in json.loads(server_modules.stdout)


def test_submit_and_wait_give_typed_jobs(client: Client) -> None:
    job = client.submit("sim", ["a.jpg", "b.jpg"], params={"sim_seconds": 0.3})

    done = client.wait(job.id, timeout_s=20)

    assert isinstance(job, Job)
    assert job.state in ("queued", "running")
    assert done.state == "succeeded"
    assert done.inputs == ["a.jpg", "b.jpg"]
    assert done.progress is not None
    assert done.progress.done == done.progress.total
    assert done.result is not None
    assert done.result["images"] == 2


def test_wait_gives_up_after_its_timeout(client: Client) -> None:
    job = client.submit("sim", ["slow.jpg"], params={"sim_seconds": 20, "sim_steps": 200})

    with pytest.raises(TimeoutError, match=r"did not end within 0\.5 s"):
        client.wait(job.id, timeout_s=0.5)
    client.cancel(job.id)
    assert client.wait(job.id, timeout_s=20).state == "cancelled"


def test_submit_with_prefer_wait_returns_the_finished_job(client: Client) -> None:
    job = client.submit("sim", ["quick.jpg"], params={"sim_seconds": 0.05}, wait_s=10)

    assert job.state == "succeeded"


def test_uploaded_files_and_a_paged_result(client: Client, tmp_path: Path) -> None:
    files = [tmp_path / f"img-{n}.jpg" for n in range(5)]
    for path in files:
        path.write_bytes(b"not really an image")

    job = client.wait(client.submit("sim", files=files).id, timeout_s=20)
    entries = list(client.result(job.id, page_size=2))  # 3 pages

    assert job.inputs == [path.name for path in files]
    assert [entry.source for entry in entries] == job.inputs
    assert all(isinstance(entry, DetectImage) for entry in entries)
    found = sum(len(entry.detections) for entry in entries if isinstance(entry, DetectImage))
    assert job.result is not None
    assert found == job.result["detections"]


def test_events_follow_to_the_end_and_resume_with_last_event_id(client: Client) -> None:
    job = client.submit("sim", ["events.jpg"], params={"sim_seconds": 0.6, "sim_steps": 4})

    stream = client.events(job.id)
    first = next(stream)
    stream.close()  # as if the connection dropped
    rest = list(client.events(job.id, last_event_id=first.id))

    events = [first, *rest]
    assert first.event == "state"
    assert [int(event.id or 0) for event in events] == sorted({int(e.id or 0) for e in events})
    assert events[-1].job.state == "succeeded"
    assert all(event.job.state in ("queued", "running") for event in events[:-1])


def test_training_validation_and_export_results(client: Client) -> None:
    trained = client.wait(
        client.train("sim", params={"sim_steps": 3, "sim_seconds": 0.3}).id, timeout_s=20
    )
    validated = client.wait(client.validate("sim", "ds/data.yaml", split="test").id, timeout_s=20)
    exported = client.wait(client.export("sim", "onnx", imgsz=320).id, timeout_s=20)

    training = client.result_detail(trained.id).root
    validation = client.result_detail(validated.id).root
    export = client.result_detail(exported.id).root
    assert isinstance(training, TrainingResultDetail)
    assert training.epochs == 3
    assert [entry["epoch"] for entry in client.metrics(trained.id)] == [1, 2, 3]
    assert isinstance(validation, ValidationResultDetail)
    assert (validation.split, validated.split) == ("test", "test")
    assert isinstance(export, ExportResultDetail)
    assert export.format == "onnx"
    assert exported.params["imgsz"] == 320


def test_cancel_delete_and_listing(client: Client) -> None:
    job = client.submit("sim", ["cancel.jpg"], params={"sim_seconds": 20, "sim_steps": 200})

    client.cancel(job.id)
    ended = client.wait(job.id, timeout_s=20)
    page = client.jobs(states=["cancelled"], limit=500)
    client.delete(job.id)

    assert ended.state == "cancelled"
    assert job.id in [listed.id for listed in page.jobs]
    with pytest.raises(ApiError) as gone:
        client.job(job.id)
    assert (gone.value.exit_code, gone.value.code) == (ExitCode.NOT_FOUND, "job_not_found")


def test_errors_carry_the_command_lines_exit_codes(client: Client, server: Server) -> None:
    with pytest.raises(ApiError) as refused:
        client.train("sim", gpus=3)
    with pytest.raises(ApiError) as missing:
        client.model("no-such-model")
    with Client("http://127.0.0.1:9", "") as nowhere, pytest.raises(ApiError) as unreachable:
        nowhere.devices()

    assert (refused.value.exit_code, refused.value.code) == (ExitCode.USAGE, "too_many_gpus")
    assert refused.value.status == 422
    assert missing.value.exit_code is ExitCode.NOT_FOUND
    assert (unreachable.value.exit_code, unreachable.value.code) == (
        ExitCode.UNAVAILABLE,
        "unreachable",
    )


def test_devices_are_typed(client: Client) -> None:
    devices = client.devices()

    assert isinstance(devices, Devices)
    assert devices.runtime == "simulated"
    assert [lane.id for lane in devices.devices] == ["sim:0", "sim:1"]


def test_models_import_download_and_delete(client: Client, weights: Path, tmp_path: Path) -> None:
    model, created = client.import_model(weights, name="client-tiny")
    again, created_again = client.import_model(weights)
    try:
        assert isinstance(model, Model)
        assert (created, created_again, again.id) == (True, False, model.id)
        assert model.id in [listed.id for listed in client.models()]
        assert client.variants("client-tiny") == []
        written = client.download_model("client-tiny", tmp_path)
        assert written.read_bytes() == weights.read_bytes()
        assert not list(tmp_path.glob(".*.part"))
    finally:
        client.delete_model("client-tiny")


async def test_the_async_client_does_the_same(server: Server, tmp_path: Path) -> None:
    upload = tmp_path / "async.jpg"
    upload.write_bytes(b"not really an image")
    async with AsyncClient(server.url, "") as client:
        job = await client.submit("sim", files=[upload], params={"sim_seconds": 0.4})
        events = [event async for event in client.events(job.id)]
        done = await client.wait(job.id, timeout_s=20)
        entries = [entry async for entry in client.result(job.id, page_size=1)]
        quick = await client.validate("sim", wait_s=10)
        devices = await client.devices()
        with pytest.raises(ApiError) as missing:
            await client.job("no-such-job")

    assert events[-1].job.state == "succeeded" == done.state
    assert [entry.source for entry in entries] == ["async.jpg"]
    assert quick.state == "succeeded"
    assert len(devices.devices) == 2
    assert missing.value.exit_code is ExitCode.NOT_FOUND
