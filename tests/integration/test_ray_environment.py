"""The Ray plug-in prepares its environment when the server starts it, not when it is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from yolo_orch.ray_cluster.wiring import prepare_environment

PROBE = """
import json, os, sys
before = dict(os.environ)
import yolo_orch.ray_cluster
import yolo_orch.ray_cluster.wiring
keys = set(before) | set(os.environ)
changed = sorted(key for key in keys if before.get(key) != os.environ.get(key))
print(json.dumps({"changed": changed, "ray_imported": "ray" in sys.modules}))
"""


def test_importing_the_plug_in_changes_no_environment_and_imports_no_ray() -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout) == {"changed": [], "ray_imported": False}


def test_starting_turns_rays_failure_signal_handler_off_unless_the_operator_set_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", raising=False)
    prepare_environment()
    assert os.environ["RAY_DISABLE_FAILURE_SIGNAL_HANDLER"] == "1"

    monkeypatch.setenv("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "0")
    prepare_environment()
    assert os.environ["RAY_DISABLE_FAILURE_SIGNAL_HANDLER"] == "0"
