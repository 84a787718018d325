"""The demo's plan and its failures, without a server (tests/acceptance/test_demo.py: whole)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from yolo_orch import cli
from yolo_orch.client.errors import ExitCode
from yolo_orch.demo.run import DemoPlan, main
from yolo_orch.demo.server import free_port


def test_a_smaller_budget_scales_the_splits_and_draws_images_at_the_training_size() -> None:
    plan = DemoPlan().scaled(epochs=2, imgsz=64, train_images=40)

    assert (plan.epochs, plan.imgsz) == (2, 64)
    assert (plan.dataset.train, plan.dataset.val, plan.dataset.test) == (40, 8, 8)
    assert plan.dataset.size == 64


def test_the_default_plan_is_the_measured_one() -> None:
    plan = DemoPlan().scaled(epochs=None, imgsz=None, train_images=None)

    assert plan == DemoPlan()
    assert (plan.dataset.train, plan.dataset.val, plan.dataset.test) == (600, 60, 12)
    assert plan.dataset.size == plan.imgsz == 128
    assert plan.epochs <= 10  # ultralytics' close_mosaic: no mosaic in a run this short


def test_a_server_that_does_not_answer_ends_the_demo_with_status_1(tmp_path: Path) -> None:
    lines: list[str] = []
    plan = DemoPlan(root=tmp_path, url=f"http://127.0.0.1:{free_port()}").scaled(1, 64, 6)

    assert main(plan, lines.append) == 1

    assert lines[-1].startswith("yolo-orch demo: POST /v1/jobs: no answer from http://127.0.0.1:")
    assert (tmp_path / "dataset" / "data.yaml").is_file()


def test_without_the_runtime_the_command_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *args: None if name == "ultralytics" else real_find_spec(name, *args),
    )

    assert cli.main(["demo", "--dir", str(tmp_path)]) == ExitCode.USAGE

    assert "pip install 'yolo-orch[yolo]'" in capsys.readouterr().err
    assert not (tmp_path / "dataset").exists()
