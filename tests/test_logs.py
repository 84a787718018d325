from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from yolo_orch.logs import JsonFormatter, current_job, install_job_logs, remove_job_logs


def record(message: str, **extra: object) -> logging.LogRecord:
    made = logging.LogRecord("yolo_orch.test", logging.INFO, __file__, 1, message, (), None)
    made.__dict__.update(extra)
    return made


def test_json_lines_carry_the_job_id_and_extras() -> None:
    line = json.loads(JsonFormatter().format(record("job started", job_id="j1", lane="cuda:0")))
    assert line["msg"] == "job started"
    assert line["level"] == "info"
    assert line["logger"] == "yolo_orch.test"
    assert (line["job_id"], line["lane"]) == ("j1", "cuda:0")
    assert line["ts"].endswith("+00:00")


def test_records_land_in_the_log_of_the_job_in_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    # ultralytics' logger does not propagate; its level is its own (INFO when verbose).
    ultralytics = logging.getLogger("ultralytics")
    monkeypatch.setattr(ultralytics, "propagate", False)
    monkeypatch.setattr(ultralytics, "disabled", False)
    level = ultralytics.level
    ultralytics.setLevel(logging.INFO)  # setLevel, not an attribute: loggers cache levels
    request.addfinalizer(lambda: ultralytics.setLevel(level))
    handler = install_job_logs(tmp_path)
    try:
        token = current_job.set("j2")
        logging.getLogger("yolo_orch.runner").info("epoch 1 done")
        logging.getLogger("ultralytics").info("from ultralytics")
        current_job.reset(token)
        logging.getLogger("yolo_orch.runner").info("belongs to nobody")
        logging.getLogger("yolo_orch.x").info("tagged", extra={"job_id": "j3"})
    finally:
        remove_job_logs(handler)
    lines = (tmp_path / "j2" / "job.log").read_text().splitlines()
    assert [line.split(": ", 1)[1] for line in lines] == ["epoch 1 done", "from ultralytics"]
    assert (tmp_path / "j3" / "job.log").read_text().rstrip().endswith("tagged")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j2", "j3"]
