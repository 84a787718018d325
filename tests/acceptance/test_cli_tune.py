"""`yolo-orch tune` against a real server (simulated runtime, 2 lanes, in-memory database): the
search submitted from the command line runs its trials and the summary names the best."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from yolo_orch.cli import app
from yolo_orch.client import Client, ExitCode
from yolo_orch.testing import running_server


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = tmp_path_factory.mktemp("cli-tune-server")
    with running_server(
        data_dir=base / "data",
        log_dir=base / "logs",
        startup_timeout_s=20.0,
        database_url="memory://",
        runtime="simulated",
        log_level="warning",
    ) as server:
        yield server.url


def test_tune_waits_for_its_trials_and_names_the_best(server_url: str) -> None:
    args = ["tune", "-m", "sim", "--space", "lr0=0.0005..0.2:log", "--trials", "3"]
    args += ["--epochs", "2", "--pruner", "none", "-p", "sim_seconds=0.2", "--wait"]
    done = CliRunner().invoke(app, args, env={"YOLO_ORCH_URL": server_url})

    assert done.exit_code == 0, done.output
    assert "3 trials: 3 complete" in done.stdout
    (best_line,) = [line for line in done.stdout.splitlines() if "best: trial" in line]
    tune_id = done.stdout.split()[2]  # "submitted job <id> (queued)"
    with Client(server_url) as client:
        result = client.result_detail(tune_id).root.model_dump(mode="json")
    best = result["best"]
    assert f"best: trial {best['number']}, mAP50-95 {best['value']:.3f}" in best_line
    assert f"lr0={best['params']['lr0']}" in best_line


def test_a_malformed_space_is_a_usage_error_and_submits_nothing(server_url: str) -> None:
    env = {"YOLO_ORCH_URL": server_url}

    def tunes() -> int:
        listed = CliRunner().invoke(app, ["list", "--json"], env=env)
        return sum(job["kind"] == "tune" for job in json.loads(listed.stdout)["jobs"])

    before = tunes()
    refused = CliRunner().invoke(app, ["tune", "-m", "sim", "--space", "lr0=1..2:cube"], env=env)

    assert refused.exit_code == ExitCode.USAGE
    assert "'cube'" in refused.output  # what was wrong, in rich's box
    assert tunes() == before
