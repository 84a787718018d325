"""The crash harness, short: 3 cycles of 40 submissions, each cycle with a SIGKILL at a random
moment and a restart, then the Jepsen-style total-queue check (bench/chaos.py has the long run)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from yolo_orch.testing.chaos import run_chaos


@pytest.mark.acceptance
def test_random_sigkills_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    report, server = run_chaos(
        tmp_path / "var", tmp_path / "logs", cycles=3, jobs=40, clients=4, seed=7
    )
    try:
        assert report.kills == 3
        assert report.outcomes["refused"] == 0, report.outcomes
        assert report.outcomes["acked"] >= 100, report.outcomes  # most sends got an answer
        assert sum(report.states.values()) >= report.outcomes["acked"]
        assert set(report.errors) <= {"interrupted"}, report.errors
    except AssertionError:
        for path in server.log_paths:
            print(f"===== {path.name} =====\n{path.read_text(errors='replace')[-3000:]}")
        raise


def test_the_queue_checker_still_checks_under_python_dash_o() -> None:
    """bench.chaos prints "OK" only after `check_total_queue` passed, and `-O` strips asserts."""
    script = (
        "from yolo_orch.testing.chaos import Submission, check_total_queue\n"
        "lost = Submission(0, {'kind': 'inference', 'inputs': ['t0']}, 'acked', 'job-0')\n"
        "check_total_queue(None, [lost], [])\n"
    )
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "src"), str(root)])}
    done = subprocess.run(
        [sys.executable, "-O", "-c", script], cwd=root, env=env, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "CheckFailed: 1 acknowledged job(s) lost" in done.stderr
