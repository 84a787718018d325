"""`yolo-orch alias` against a real server (`yolo-orch serve` in a subprocess, an in-memory
database): set, get, list, history, rollback and rm, with the server's refusals as exit codes."""

from __future__ import annotations

import json
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
    base = tmp_path_factory.mktemp("cli-alias-server")
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


def test_alias_set_get_list_history_rollback_rm(cli: Any, tmp_path: Path) -> None:
    from yolo_orch.testing.yolo import build_checkpoint, ensure_ultralytics

    ensure_ultralytics(tmp_path)
    for name, classes in (("v1", ("person", "car")), ("v2", ("person", "car", "dog"))):
        weights = build_checkpoint(tmp_path / f"{name}.pt", classes)
        imported = cli("models", "import", str(weights), "--name", f"detector-{name}")
        assert imported.exit_code == 0, imported.output

    made = cli("alias", "set", "detector@production", "detector-v1", "--json")
    moved = cli("alias", "set", "detector@production", "detector-v2", "--reason", "more classes")
    shown = cli("alias", "get", "detector@production", "--json")
    listed = cli("alias", "list")
    history = cli("alias", "history", "detector@production")
    back = cli("alias", "rollback", "detector@production", "--json")
    deleted = cli("alias", "rm", "detector@production")
    gone = cli("alias", "get", "detector@production")
    bad = cli("alias", "get", "detector")

    assert made.exit_code == 0, made.output
    first = json.loads(made.stdout)
    assert (first["ref"], first["updated_by"]) == ("detector@production", "anonymous")
    assert moved.exit_code == 0, moved.output
    assert moved.stdout.startswith("detector@production -> ")
    assert f"(was {first['model_id']}; by anonymous)" in moved.stdout
    assert json.loads(shown.stdout)["model_id"] != first["model_id"]
    assert "detector@production" in listed.stdout
    assert "more classes" in history.stdout
    assert json.loads(back.stdout)["model_id"] == first["model_id"]
    assert deleted.stdout.strip() == "deleted alias detector@production"
    assert gone.exit_code == ExitCode.NOT_FOUND
    assert "(alias_not_found)" in gone.stderr
    assert bad.exit_code == ExitCode.USAGE
