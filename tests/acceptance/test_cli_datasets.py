"""`yolo-orch datasets` against a real server (`yolo-orch serve` in a subprocess): create, list,
show, download and delete, with the server's refusals as exit codes."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from yolo_orch.cli import app
from yolo_orch.client import ExitCode
from yolo_orch.testing import running_server


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = tmp_path_factory.mktemp("cli-datasets-server")
    with running_server(
        data_dir=base / "data",
        log_dir=base / "logs",
        startup_timeout_s=20.0,
        database_url="memory://",
        log_level="warning",
    ) as server:
        yield server.url


@pytest.fixture
def cli(server_url: str) -> Any:
    def run(*args: str) -> Result:
        env = {"YOLO_ORCH_URL": server_url, "YOLO_ORCH_TOKEN": None}
        return CliRunner().invoke(app, list(args), env=env)

    return run


def test_datasets_create_list_show_download_delete(cli: Any, tmp_path: Path) -> None:
    made = cli("datasets", "create", "cars", "--task", "detect", "-c", "car", "-c", "bus")
    again = cli("datasets", "create", "cars", "--task", "detect", "-c", "car")
    pose = cli(
        "datasets", "create", "people", "--task", "pose", "-c", "person", "--kpt-shape", "17", "3"
    )
    listed = cli("datasets", "list")
    shown = cli("datasets", "show", "cars", "--json")
    table = cli("datasets", "show", "cars")
    downloaded = cli("datasets", "download", "cars", "--to", str(tmp_path))
    deleted = cli("datasets", "delete", "cars")
    gone = cli("datasets", "show", "cars")

    assert made.exit_code == 0, made.output
    assert made.stdout.strip() == "created dataset cars (detect): dataset:cars"
    assert again.exit_code == ExitCode.USAGE, again.output
    assert "(dataset_exists)" in again.stderr
    assert pose.exit_code == 0, pose.output
    assert json.loads(cli("datasets", "show", "people", "--json").stdout)["kpt_shape"] == [17, 3]
    assert "cars" in listed.stdout
    assert "people" in listed.stdout
    body = json.loads(shown.stdout)
    assert (body["names"], body["items"]) == (["car", "bus"], 0)
    assert "bus" in table.stdout
    assert downloaded.exit_code == 0, downloaded.output
    archive = Path(downloaded.stdout.strip())
    assert archive == tmp_path / "cars.zip"
    assert "cars/data.yaml" in zipfile.ZipFile(archive).namelist()
    assert deleted.stdout.strip() == "deleted dataset cars"
    assert gone.exit_code == ExitCode.NOT_FOUND
    assert "(dataset_not_found)" in gone.stderr
