"""Cross-job batches through the real YOLO inference runner on the CPU: jobs share forward passes
(asserted on the runner's batch record), and each keeps its own entries, cancel and failure."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from yolo_orch.domain import JobResult
from yolo_orch.errors import JobCancelled
from yolo_orch.registry.weights import ResolvedWeights, sha256_file
from yolo_orch.runners.base import BatchRecord
from yolo_orch.runners.inference import YoloInferenceRunner
from yolo_orch.testing.yolo import (
    RecordingContext,
    build_checkpoint,
    ensure_ultralytics,
    fixed_resolver,
    make_images,
    write_corrupt,
)

IMGSZ = 128


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> YoloInferenceRunner:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    path = build_checkpoint(tmp_path_factory.mktemp("weights") / "tiny.pt")
    return YoloInferenceRunner(
        fixed_resolver({"tiny": ResolvedWeights(path, sha256_file(path))}),
        data_roots=[tmp_path_factory.getbasetemp()],
    )


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return make_images(tmp_path_factory.mktemp("images"), 8, seed=5)[::4]  # one shape


def _context(
    job_id: str, tmp_path: Path, inputs: list[Path], recorder: RecordingContext, **params: Any
) -> Any:
    ctx = recorder.context(tmp_path / job_id, inputs, imgsz=IMGSZ, **params)
    return replace(ctx, job=replace(ctx.job, id=job_id))


def test_jobs_share_a_forward_pass_and_get_what_they_would_alone(
    runner: YoloInferenceRunner, images: list[Path], tmp_path: Path
) -> None:
    alone = runner.run(_context("alone", tmp_path, images[:1], RecordingContext()))
    corrupt = write_corrupt(tmp_path / "broken.jpg")
    ctxs = [
        _context("a", tmp_path, images[:1], RecordingContext()),
        _context("b", tmp_path, [images[1], corrupt], RecordingContext()),
        _context("c", tmp_path, images[:1], RecordingContext(), save_annotated=True),
    ]
    before = len(runner.batches)

    outcomes = runner.run_batch(ctxs)

    assert runner.batches[before:] == [BatchRecord(("a", "b", "c"), 3)]
    assert all(isinstance(outcome, JobResult) for outcome in outcomes)
    a, b, c = (outcome.detail["images"] for outcome in outcomes if isinstance(outcome, JobResult))
    assert [image["source"] for image in a] == [images[0].name]
    assert a == alone.detail["images"]
    assert "error" in b[1]  # its bad image is its own
    assert "error" not in b[0]
    assert "annotated" in c[0]
    assert "annotated" not in a[0]


def test_a_cancelled_or_invalid_job_leaves_its_companions_their_results(
    runner: YoloInferenceRunner, images: list[Path], tmp_path: Path
) -> None:
    cancelled = RecordingContext(cancel_after=0)
    ctxs = [
        _context("ok", tmp_path, images[:2], RecordingContext()),
        _context("cancelled", tmp_path, images[:2], cancelled),
        _context("invalid", tmp_path, images[:1], RecordingContext(), top_k=3),  # detect model
    ]
    ok, stopped, refused = runner.run_batch(ctxs)
    assert isinstance(ok, JobResult)
    assert ok.summary["images"] == 2
    assert isinstance(stopped, JobCancelled)
    assert isinstance(refused, Exception)
    assert "top_k" in str(refused)
