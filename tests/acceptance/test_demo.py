"""`yolo-orch demo` end to end on a tiny budget: it starts a real server with the real runtime,
trains, validates, exports and runs inference through the HTTP API, and stops the server.

The full-size demo (600 images, 6 epochs, mAP50 above 0.5) takes minutes and is measured by hand
(README.md gives the command and what it printed); this checks that every step succeeds and the
summary names what was made, in under a minute."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from yolo_orch.cli import main

pytestmark = pytest.mark.acceptance

TINY = ["--epochs", "1", "--imgsz", "64", "--train-images", "24"]


def test_the_demo_runs_every_step_and_stops_its_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "demo"

    assert main(["demo", "--dir", str(root), *TINY]) == 0

    out = capsys.readouterr().out
    for kind in ("training", "validation", "export", "inference"):
        match = re.search(rf"^    {kind} +([0-9a-f-]{{36}}) ", out, re.MULTILINE)
        assert match, f"no {kind} job in the summary:\n{out}"
        assert f"{kind} job {match.group(1)}: succeeded" in out
    assert re.search(r"^  dashboard   http://127\.0\.0\.1:\d+/$", out, re.MULTILINE), out
    assert re.search(r"^  model       shapes-\d{8}-\d{6} ", out, re.MULTILINE), out
    assert re.search(r"validation  mAP50 \d\.\d{3}  mAP50-95 \d\.\d{3}", out), out
    assert re.search(r"held out    8 test images, .*circle \d+/\d+", out), out
    assert "onnx variant " in out
    assert "onnx variant None" not in out
    assert "The server has stopped" in out
    assert f"YOLO_ORCH_DATA_DIR={root.resolve() / 'server'}" in out
    # It stopped by draining (exit 0 after SIGTERM), as its log says.
    assert "Traceback" not in (root / "server.log").read_text()
