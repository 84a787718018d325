"""The inference runner reads each input's header before decoding it: an image over
`max_image_pixels` becomes an error entry and is never decoded."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.hostile import PeakRss, png_bomb
from yolo_orch.registry.weights import ResolvedWeights, sha256_file
from yolo_orch.runners.inference import YoloInferenceRunner
from yolo_orch.testing.yolo import (
    RecordingContext,
    build_checkpoint,
    ensure_ultralytics,
    fixed_resolver,
    make_images,
)

IMGSZ = 128
DECODE_BOUND_MB = 300
"""Decoding the 30000 x 30000 bomb would take 2.7 GB (BGR)."""


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> ResolvedWeights:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    path = build_checkpoint(tmp_path_factory.mktemp("weights") / "tiny.pt")
    return ResolvedWeights(path, sha256_file(path))


def test_an_input_over_the_limit_is_an_error_entry_and_is_not_decoded(
    weights: ResolvedWeights, tmp_path: Path
) -> None:
    photo = make_images(tmp_path / "images", 1)[0]
    bomb = png_bomb(tmp_path / "bomb.png", 30_000, 30_000)
    runner = YoloInferenceRunner(
        fixed_resolver({"tiny": weights}),
        model_cache_size=1,
        max_image_pixels=50_000_000,
        data_roots=[tmp_path],
    )
    context = RecordingContext().context(tmp_path / "job", [photo], imgsz=IMGSZ)
    runner.run(context)  # the model loaded and warmed up: what stays is not counted below

    with PeakRss(os.getpid()) as memory:
        result = runner.run(
            RecordingContext().context(tmp_path / "job", [bomb, photo], imgsz=IMGSZ)
        )

    first, second = result.detail["images"]
    assert first["source"] == "bomb.png"
    assert "max_image_pixels" in first["error"]
    assert "detections" in second
    assert result.summary["failed_images"] == 1
    assert memory.growth_mb < DECODE_BOUND_MB


def test_a_small_limit_refuses_an_ordinary_photo(weights: ResolvedWeights, tmp_path: Path) -> None:
    photo = make_images(tmp_path / "images", 1)[0]
    runner = YoloInferenceRunner(
        fixed_resolver({"tiny": weights}), max_image_pixels=100, data_roots=[tmp_path]
    )

    result = runner.run(RecordingContext().context(tmp_path / "job", [photo], imgsz=IMGSZ))

    (entry,) = result.detail["images"]
    assert entry["error"].startswith("the image is ")
    assert entry["error"].endswith("this server decodes at most 100 (max_image_pixels)")
