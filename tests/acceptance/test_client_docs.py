"""docs/client.md's Python examples run as written: every ```python block, in order, as one
script, against `yolo-orch serve` with the simulated runtime (URL from $YOLO_ORCH_URL, as the
page says), in a folder holding the `tiny.pt` the registry example imports."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from yolo_orch.testing import Server

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "client.md"
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def test_every_python_example_of_the_client_page_runs(tmp_path: Path) -> None:
    from yolo_orch.testing.yolo import build_checkpoint, ensure_ultralytics

    blocks = PYTHON_BLOCK.findall(PAGE.read_text(encoding="utf-8"))
    assert len(blocks) >= 8, "the page lost its examples"
    work = tmp_path / "work"
    work.mkdir()
    ensure_ultralytics(tmp_path)
    build_checkpoint(work / "tiny.pt")
    server = Server(tmp_path / "data", tmp_path / "logs", "docs", log_level="warning")
    server.start()
    try:
        env = {key: value for key, value in os.environ.items() if not key.startswith("YOLO_ORCH")}
        env["YOLO_ORCH_URL"] = server.url
        env["PYTHONPATH"] = str(ROOT / "src")
        completed = subprocess.run(
            [sys.executable, "-c", "\n\n".join(blocks)],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    finally:
        server.cleanup()

    assert completed.returncode == 0, completed.stderr[-4000:]
    printed = completed.stdout
    assert f"{server.url} simulated" in printed
    assert "succeeded" in printed
    assert "404 job_not_found 4" in printed  # the errors example: status, code, exit code
    assert (work / "tiny.pt").is_file()
