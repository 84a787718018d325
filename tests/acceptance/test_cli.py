"""The `yolo-orch` command line against a real server (`yolo-orch serve` in a subprocess, the
simulated runtime, an in-memory database), run in-process with typer's CliRunner."""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner, Result

from yolo_orch.cli import app
from yolo_orch.client import ExitCode
from yolo_orch.testing import free_port, running_server

STARTUP_TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One `yolo-orch serve` for the whole module (jobs are tagged apart by their ids)."""
    base = tmp_path_factory.mktemp("cli-server")
    with running_server(
        data_dir=base / "data",
        log_dir=base / "logs",
        startup_timeout_s=STARTUP_TIMEOUT_S,
        sim_lanes=2,
        database_url="memory://",
        log_level="warning",
    ) as server:
        yield server.url


@pytest.fixture
def cli(server_url: str) -> Any:
    """`cli("status", job_id)`: run `yolo-orch` against the server; the click Result."""
    runner = CliRunner()

    def run(*args: str) -> Result:
        return runner.invoke(
            app, list(args), env={"YOLO_ORCH_URL": server_url, "YOLO_ORCH_TOKEN": None}
        )

    return run


def _submit(cli: Any, *args: str) -> str:
    result = cli("submit", "--model", "sim", "--quiet", *args)
    assert result.exit_code == 0, result.output
    job_id: str = result.stdout.strip()
    return job_id


def _json(result: Result) -> Any:
    return json.loads(result.stdout)


def test_submit_then_wait_succeeds(cli: Any) -> None:
    job_id = _submit(cli, "--input", "a.jpg", "-i", "b.jpg", "-p", "sim_seconds=0.2")

    result = cli("wait", job_id)

    assert result.exit_code == ExitCode.OK, result.output
    assert f"job {job_id} succeeded" in result.stdout
    status = cli("status", job_id, "--json")
    assert status.exit_code == 0
    job = _json(status)
    assert job["state"] == "succeeded"
    assert job["inputs"] == ["a.jpg", "b.jpg"]
    assert job["progress"]["done"] == job["progress"]["total"]


def test_submit_wait_of_a_failing_job_exits_1(cli: Any) -> None:
    result = cli("submit", "-m", "sim", "-i", "a.jpg", "-p", "sim_fail=error", "--wait")

    assert result.exit_code == ExitCode.JOB_FAILED, result.output
    assert re.search(r"job \S+ failed: .*\(runtime_error\)", result.stdout)
    submitted = re.search(r"submitted job (\S+)", result.stdout)
    assert submitted is not None
    status = cli("status", submitted.group(1))
    assert status.exit_code == ExitCode.JOB_FAILED
    assert "runtime_error" in status.stdout


def test_wait_of_a_cancelled_job_exits_2(cli: Any, server_url: str) -> None:
    job_id = _submit(cli, "-i", "a.jpg", "-p", "sim_seconds=20", "-p", "sim_steps=200")

    def cancel_once_running() -> None:
        with httpx.Client(base_url=server_url, timeout=5) as http:
            deadline = time.monotonic() + 10
            while http.get(f"/v1/jobs/{job_id}").json()["state"] != "running":
                assert time.monotonic() < deadline
                time.sleep(0.05)
            http.post(f"/v1/jobs/{job_id}/cancel").raise_for_status()

    canceller = threading.Thread(target=cancel_once_running)
    canceller.start()
    result = cli("wait", job_id)
    canceller.join()

    assert result.exit_code == ExitCode.JOB_CANCELLED, result.output
    assert f"job {job_id} cancelled" in result.stdout
    assert cli("status", job_id).exit_code == ExitCode.JOB_CANCELLED


def test_cancel_a_queued_job_and_cancel_again(cli: Any) -> None:
    # Two lanes busy with a long training job, so the next job stays queued.
    blocker = _submit(
        cli, "--training", "--gpus", "2", "-p", "sim_seconds=20", "-p", "sim_steps=200"
    )
    job_id = _submit(cli, "-i", "a.jpg")

    result = cli("cancel", job_id)

    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"job {job_id} cancelled"
    again = cli("cancel", job_id)
    assert again.exit_code == ExitCode.USAGE  # 409: already finished
    assert again.stderr.startswith("error: ")
    assert again.stderr.rstrip().endswith("(job_finished)")
    running = cli("cancel", blocker, "--json")
    assert running.exit_code == 0, running.output
    assert _json(running)["cancel_requested"] is True
    assert cli("wait", blocker, "--quiet").exit_code == ExitCode.JOB_CANCELLED


def test_delete_a_finished_job_and_refuse_an_active_one(cli: Any) -> None:
    job_id = _submit(cli, "-i", "a.jpg", "-p", "sim_seconds=0.05")
    assert cli("wait", job_id, "--quiet").exit_code == ExitCode.OK

    result = cli("delete", job_id)

    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"deleted job {job_id}"
    assert cli("status", job_id).exit_code == ExitCode.NOT_FOUND
    active = _submit(cli, "-i", "a.jpg", "-p", "sim_seconds=20", "-p", "sim_steps=200")
    refused = cli("delete", active)
    assert refused.exit_code == ExitCode.USAGE  # 409
    assert refused.stderr.rstrip().endswith("(job_active)")
    cli("cancel", active)


def test_submit_local_files_uploads_them(cli: Any, tmp_path: Path) -> None:
    files = [tmp_path / "cat.jpg", tmp_path / "dog.png"]
    for path in files:
        path.write_bytes(b"not really an image")

    result = cli(
        "submit", "-m", "sim", "-f", str(files[0]), "--file", str(files[1]), "-w", "--json"
    )

    assert result.exit_code == 0, result.output
    job = _json(result)  # --wait --json: the final job only
    assert job["state"] == "succeeded"
    assert job["inputs"] == ["cat.jpg", "dog.png"]
    detections = _json(cli("result", job["id"]))
    assert [image["source"] for image in detections["images"]] == ["cat.jpg", "dog.png"]


def test_training_submission_and_a_refused_one(cli: Any) -> None:
    ok = cli("submit", "--training", "-m", "sim", "--gpus", "2", "-p", "sim_seconds=0.1", "--wait")
    assert ok.exit_code == 0, ok.output

    refused = cli("submit", "--training", "-m", "sim", "--gpus", "3")

    assert refused.exit_code == ExitCode.USAGE
    assert "(too_many_gpus)" in refused.stderr


def test_validate_submits_a_validation_job_and_list_filters_on_it(cli: Any) -> None:
    done = cli(
        "validate", "-m", "sim", "--dataset", "ds/data.yaml", "--split", "test", "--wait", "--json"
    )
    assert done.exit_code == 0, done.output
    job = _json(done)
    assert (job["kind"], job["split"], job["state"]) == ("validation", "test", "succeeded")
    assert job["result"]["split"] == "test"

    listed = _json(cli("list", "--kind", "validation", "--json", "--all"))

    assert job["id"] in [j["id"] for j in listed["jobs"]]
    assert {j["kind"] for j in listed["jobs"]} == {"validation"}
    bad_split = cli("validate", "-m", "sim", "--dataset", "d", "--split", "train")
    assert bad_split.exit_code == ExitCode.USAGE


def test_params_are_parsed_as_json_where_they_parse(cli: Any) -> None:
    job_id = _submit(
        cli, "-i", "a.jpg", "-p", "conf=0.5", "-p", "classes=[0, 2]", "-p", "half=true"
    )

    params = _json(cli("status", job_id, "--json"))["params"]

    assert (params["conf"], params["classes"], params["half"]) == (0.5, [0, 2], True)


def test_idempotency_key_returns_the_same_job(cli: Any) -> None:
    first = _submit(cli, "-i", "a.jpg", "--idempotency-key", "cli-test-key")
    second = _submit(cli, "-i", "a.jpg", "--idempotency-key", "cli-test-key")

    assert first == second


def test_list_follows_pages_and_filters(cli: Any) -> None:
    ids = [_submit(cli, "-i", f"list-{n}.jpg") for n in range(4)]  # one more than a page of 3
    for job_id in ids:
        assert cli("wait", job_id, "-q").exit_code == 0

    everything = _json(cli("list", "--all", "--limit", "1", "--json"))
    one_page = cli("list", "--limit", "1", "--json")
    failed = _json(cli("list", "--state", "failed", "--kind", "inference", "--json", "--all"))
    table = cli("list", "--limit", "3")

    listed = [job["id"] for job in everything["jobs"]]
    assert set(ids) <= set(listed)
    assert len(listed) == len(set(listed))
    assert everything["next_cursor"] is None
    assert len(_json(one_page)["jobs"]) == 1
    assert _json(one_page)["next_cursor"]
    assert all(job["state"] == "failed" for job in failed["jobs"])
    assert table.exit_code == 0
    assert ids[-1] in table.stdout  # newest first
    assert "--cursor" in table.stderr


def test_result_of_an_unfinished_job_is_refused(cli: Any) -> None:
    job_id = _submit(cli, "-i", "a.jpg", "-p", "sim_seconds=5")

    result = cli("result", job_id)

    assert result.exit_code == ExitCode.USAGE
    assert "(result_not_ready)" in result.stderr
    cli("cancel", job_id)


def test_models_list_on_an_empty_registry(cli: Any) -> None:
    table = cli("models", "list")
    as_json = cli("models", "list", "--json")

    assert table.exit_code == 0
    assert table.stdout.strip() == "no models"
    assert _json(as_json) == {"models": []}


def test_models_import_list_delete(cli: Any, tmp_path: Path) -> None:
    from yolo_orch.testing.yolo import build_checkpoint, ensure_ultralytics

    ensure_ultralytics(tmp_path)
    weights = build_checkpoint(tmp_path / "tiny.pt")

    imported = cli("models", "import", str(weights), "--name", "cli-tiny")
    again = cli("models", "import", str(weights), "--json")
    listed = cli("models", "list")
    deleted = cli("models", "delete", "cli-tiny")

    assert imported.exit_code == 0, imported.output
    assert imported.stdout.startswith("imported model cli-tiny (")
    assert "task detect, 3 classes" in imported.stdout
    assert again.exit_code == 0, again.output
    assert _json(again)["name"] == "cli-tiny"  # the same bytes: the model already registered
    assert "cli-tiny" in listed.stdout
    assert deleted.exit_code == 0
    assert deleted.stdout.strip() == "deleted model cli-tiny"
    assert _json(cli("models", "list", "--json")) == {"models": []}


def test_models_errors(cli: Any, tmp_path: Path) -> None:
    missing = cli("models", "delete", "no-such-model")
    not_weights = tmp_path / "junk.pt"
    not_weights.write_bytes(b"junk")
    refused = cli("models", "import", str(not_weights))
    no_file = cli("models", "import", str(tmp_path / "absent.pt"))

    assert missing.exit_code == ExitCode.NOT_FOUND
    assert "(model_not_found)" in missing.stderr
    assert refused.exit_code == ExitCode.USAGE, refused.output
    assert no_file.exit_code == ExitCode.USAGE


def test_devices(cli: Any) -> None:
    table = cli("devices")
    body = _json(cli("devices", "--json"))

    assert table.exit_code == 0
    assert "runtime: simulated" in table.stdout
    assert "sim:0" in table.stdout
    assert "sim:1" in table.stdout
    assert [device["id"] for device in body["devices"]] == ["sim:0", "sim:1"]


def test_unknown_job_exits_4(cli: Any) -> None:
    for command in ("status", "wait", "cancel", "result"):
        result = cli(command, "no-such-job")
        assert result.exit_code == ExitCode.NOT_FOUND, (command, result.output)
        assert result.stderr.startswith("error: ")
        assert result.stderr.rstrip().endswith("(job_not_found)")


def test_server_down_exits_5() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nobody listens there

    for args in (["status", "x"], ["wait", "x"], ["submit", "-m", "sim", "-i", "a.jpg"]):
        result = CliRunner().invoke(app, [*args, "--url", url])
        assert result.exit_code == ExitCode.UNAVAILABLE, result.output
        assert result.stderr.rstrip().endswith("(unreachable)")


def test_usage_errors_exit_3(cli: Any) -> None:
    for args in (
        ["status"],  # missing argument
        ["submit", "-m", "sim"],  # no images
        ["submit", "-m", "sim", "-i", "a", "-f", __file__],  # both kinds of images
        ["submit", "-m", "sim", "--training", "-i", "a"],
        ["submit", "-m", "sim", "-i", "a", "--gpus", "2"],
        ["submit", "-m", "sim", "-i", "a", "-p", "no-equals-sign"],
        ["list", "--state", "bogus"],
        ["no-such-command"],
    ):
        result = cli(*args)
        assert result.exit_code == ExitCode.USAGE, (args, result.output)


def test_token_create_prints_the_token_and_its_digest() -> None:
    result = CliRunner().invoke(app, ["token", "create", "--scope", "admin"])

    assert result.exit_code == 0, result.output
    token = result.stdout.split("\n\n")[1].strip()
    assert len(token) >= 43  # 32 random bytes
    digest = hashlib.sha256(token.encode()).hexdigest()
    entry = f'{{ sha256 = "{digest}", scope = "admin" }}'
    assert f"    {entry}\n" in result.stdout
    as_json = json.loads(CliRunner().invoke(app, ["token", "create", "--json"]).stdout)
    assert as_json["scope"] == "jobs"
    assert as_json["sha256"] == hashlib.sha256(as_json["token"].encode()).hexdigest()
    assert as_json["token"] != token


def test_help_documents_the_exit_codes() -> None:
    import yolo_orch.cli

    result = CliRunner().invoke(app, ["--help"])

    assert result.exit_code == 0
    for code in ExitCode:
        assert f"{code.value}  {code.description}" in result.stdout
        assert f"  {code.value}  {code.description}" in (yolo_orch.cli.__doc__ or "")


def test_chain_shows_a_chains_steps_and_cancels_what_has_not_run(cli: Any, server_url: str) -> None:
    body = {
        "kind": "training",
        "model": "sim",
        "params": {"sim_seconds": 30},
        "then": {"validate": {}, "export": {"formats": ["onnx"]}},
    }
    training = httpx.post(f"{server_url}/v1/jobs", json=body).json()

    shown = cli("chain", training["id"])
    assert shown.exit_code == ExitCode.OK, shown.output
    for kind in ("training", "validation", "export"):
        assert kind in shown.stdout

    cancelled = cli("chain", training["id"], "--cancel", "--json")
    chain = _json(cancelled)
    assert [step["kind"] for step in chain["steps"]] == ["training", "validation", "export"]
    assert [step["state"] for step in chain["steps"][1:]] == ["cancelled", "cancelled"]
    ended = cli("wait", training["id"])
    assert ended.exit_code == ExitCode.JOB_CANCELLED, ended.output
    final = cli("chain", training["id"])
    assert final.exit_code == ExitCode.JOB_CANCELLED, final.output
