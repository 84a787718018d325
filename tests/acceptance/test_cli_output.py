"""What the command line shows people: `--help` at 80 columns, the devices table, the summary
after `--wait`, a training job's epochs while it runs, and the registry's new commands, against
a real server (`yolo-orch serve`, the simulated runtime) where they need one."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner, Result

from tests.support.servers import module_server
from yolo_orch.cli import app
from yolo_orch.client import ExitCode
from yolo_orch.client.render import devices_table
from yolo_orch.client.shapes import Devices
from yolo_orch.testing import Server

WIDTH = 80
TYPE_PLACEHOLDER = re.compile(r"<(bool|str|int|float|path|int range|float range)[^>]*>")


def _help(*command: str) -> str:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": str(WIDTH)})
    assert result.exit_code == 0, result.output
    return result.stdout


COMMANDS = [
    (),
    *[(name,) for name in ("submit", "validate", "export", "status", "wait", "cancel")],
    *[(name,) for name in ("delete", "list", "result", "devices", "serve", "migrate")],
    ("models",),
    *[("models", name) for name in ("import", "list", "delete", "download")],
    ("variants",),
    *[("variants", name) for name in ("import", "list", "delete")],
    ("token", "create"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "root")
def test_help_shows_no_type_placeholders_and_breaks_lines_only_where_they_are_full(
    command: tuple[str, ...],
) -> None:
    text = _help(*command)

    assert not TYPE_PLACEHOLDER.search(text), TYPE_PLACEHOLDER.search(text)
    lines = text.splitlines()
    for line, following in itertools.pairwise(lines):
        # A description that goes on in the next row of a commands panel (its first column
        # blank) only does so because the next word did not fit on this row.
        row = re.fullmatch(r"│ ([a-z][\w-]* +)?(.*?) *│", line)
        more = re.fullmatch(r"│( +)(\S+).*│", following)
        if row is None or more is None or row[1] is None or len(more[1]) != len(row[1]) + 1:
            continue
        room = WIDTH - 2 - 1 - len(row[1]) - 1  # borders, padding, the name column
        assert len(row[2]) + 1 + len(more[2]) > room, f"broke early:\n{line}\n{following}"


def test_the_devices_table_uses_human_units() -> None:
    devices = Devices.model_validate(
        {
            "runtime": "ultralytics",
            "devices": [
                {
                    "id": "cuda:0",
                    "device_name": "NVIDIA H200",
                    "slots": 1,
                    "busy": 1,
                    "jobs": ["j1"],
                    "models": ["yolo11n"],
                    "batch_sizes": {"1": 15, "8": 3},
                    "memory_used_bytes": int(1.2 * 2**30),
                    "memory_total_bytes": 80 * 2**30,
                    "utilization_percent": 45,
                    "temperature_c": 61,
                    "power_w": 212.4,
                    "healthy": True,
                },
                {
                    "id": "cuda:1",
                    "slots": 1,
                    "busy": 0,
                    "jobs": [],
                    "models": [],
                    "healthy": True,
                    "wedged": True,
                },
            ],
        }
    )
    console = Console(width=200, record=True)
    console.print(devices_table(devices))
    text = console.export_text()

    header = " ".join(text.splitlines()[0].split())
    assert header == "LANE BUSY JOBS MODELS MEMORY UTIL TEMP POWER BATCHES"
    assert "cuda:0 (NVIDIA H200)" in text
    for shown in ("1.2 GiB / 80 GiB", "45 %", "61 °C", "212 W", "1×15, 8×3"):  # noqa: RUF001
        assert shown in text
    assert "cuda:1 wedged" in text
    assert "BYTES" not in text


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with module_server(tmp_path_factory, "cli-output") as served:
        yield served


@pytest.fixture
def cli(server: Server) -> Any:
    def run(*args: str) -> Result:
        env = {"YOLO_ORCH_URL": server.url, "YOLO_ORCH_TOKEN": None, "COLUMNS": str(WIDTH)}
        return CliRunner().invoke(app, list(args), env=env)

    return run


def test_the_devices_command_against_the_simulated_runtime(cli: Any) -> None:
    result = cli("devices")

    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "runtime: simulated"
    assert result.stdout.splitlines()[1].split() == ["LANE", "BUSY", "JOBS", "MODELS"]
    assert "sim:0" in result.stdout


def test_submit_wait_summarises_an_inference_job(cli: Any) -> None:
    result = cli("submit", "-m", "sim", "-i", "a.jpg", "-i", "b.jpg", "-i", "c.jpg", "--wait")

    assert result.exit_code == ExitCode.OK, result.output
    lines = result.stdout.splitlines()
    assert re.fullmatch(r"job \S+ succeeded in \d+\.\ds", lines[1])
    assert re.fullmatch(r"  3 images, (\d+) detections; ran pt", lines[2])
    detections = int(re.findall(r"(\d+) detections", lines[2])[0])
    counts = [int(n) for n in re.findall(r" (\d+)(?:,|$)", lines[3].partition(": ")[2])]
    assert lines[3].startswith("  per class: ")
    assert sum(counts) == detections


def test_submit_wait_summarises_training_and_shows_its_epochs(cli: Any) -> None:
    params = ["-p", "sim_steps=4", "-p", "sim_seconds=1.2"]
    job = cli("submit", "-m", "sim", "--training", "-q", *params).stdout.strip()

    result = cli("wait", job)

    assert result.exit_code == ExitCode.OK, result.output
    assert re.search(r"^  4 epochs; no model registered", result.stdout, re.MULTILINE)
    assert re.search(r"^  best: mAP50 0\.\d{3}, mAP50-95 0\.\d{3}$", result.stdout, re.MULTILINE)
    progress = re.findall(r"epoch (\d)/4, loss \d+\.\d{3}, mAP50 0\.\d+", result.stderr)
    assert progress, result.stderr
    assert progress == sorted(set(progress))


def test_validate_and_export_wait_summaries(cli: Any) -> None:
    validated = cli("validate", "-m", "sim", "--dataset", "d/data.yaml", "--wait")
    exported = cli("export", "-m", "sim", "--format", "openvino", "--imgsz", "320", "--wait")
    refused = cli("export", "-m", "sim", "--format", "tflite")

    assert validated.exit_code == ExitCode.OK, validated.output
    assert re.search(r"^  val split, 4 images: precision 0\.\d{3}, ", validated.stdout, re.M)
    assert exported.exit_code == ExitCode.OK, exported.output
    assert "  format openvino; no variant stored (the simulated runtime)" in exported.stdout
    assert refused.exit_code == ExitCode.USAGE


def test_models_download_and_variants(cli: Any, tmp_path: Path) -> None:
    from yolo_orch.testing.yolo import build_checkpoint, ensure_ultralytics

    ensure_ultralytics(tmp_path)
    weights = build_checkpoint(tmp_path / "tiny.pt")
    assert cli("models", "import", str(weights), "--name", "cli-out").exit_code == 0
    try:
        into = tmp_path / "downloads"
        into.mkdir()
        downloaded = cli("models", "download", "cli-out", str(into))
        none = cli("variants", "list", "cli-out")
        missing = cli("variants", "delete", "cli-out", "no-such-variant")
        absent = cli("variants", "import", "cli-out", str(tmp_path / "absent.onnx"))
    finally:
        cli("models", "delete", "cli-out")

    assert downloaded.exit_code == 0, downloaded.output
    assert downloaded.stdout.startswith(f"wrote {into / 'cli-out.pt'} (")
    assert (into / "cli-out.pt").read_bytes() == weights.read_bytes()
    assert none.stdout.strip() == "cli-out has no variants"
    assert missing.exit_code == ExitCode.NOT_FOUND
    assert absent.exit_code == ExitCode.USAGE
