"""The cpu lane's forward passes as traces (`runners/traced.py`): one per input shape, the eager
pass's outputs kept exactly, and the eager pass wherever a trace would not be the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.yolo_fixtures import (
    RecordingContext,
    build_checkpoint,
    ensure_ultralytics,
    fixed_resolver,
    make_images,
)
from yolo_orch.runners.inference import YoloInferenceRunner
from yolo_orch.runners.traced import TracedForward
from yolo_orch.weights import ResolvedWeights, sha256_file

torch = pytest.importorskip("torch")


class Eager:
    """A stand-in backend forward; counts the calls that ran its Python (a trace's do not)."""

    def __init__(self) -> None:
        self.calls = 0
        self.kwargs: list[dict[str, Any]] = []

    def __call__(self, im: Any, **kwargs: Any) -> Any:
        self.calls += 1
        self.kwargs.append(kwargs)
        return (im * 2, {"feats": [im + 1, im.sum(dim=1)]})


def test_each_shape_is_traced_once_and_gives_what_the_eager_pass_gives() -> None:
    eager = Eager()
    forward = TracedForward(eager)
    im = torch.rand(2, 3, 8, 8)

    first = forward(im)
    calls = eager.calls
    again = forward(im + 1)

    assert eager.calls == calls  # the trace ran, not the Python
    assert forward.shapes == [((2, 3, 8, 8), torch.float32)]
    assert forward.given_up is None
    expected = Eager()(im + 1)
    assert torch.equal(again[0], expected[0])
    assert all(
        torch.equal(a, b) for a, b in zip(again[1]["feats"], expected[1]["feats"], strict=True)
    )
    assert torch.equal(first[0], im * 2)

    forward(torch.rand(1, 3, 8, 8))  # a new shape is traced on its first pass
    assert eager.calls > calls
    assert len(forward.shapes) == 2


def test_only_the_most_recently_used_shapes_are_kept() -> None:
    forward = TracedForward(Eager(), max_shapes=2)
    for batch in (1, 2, 1, 3):
        forward(torch.rand(batch, 3, 4, 4))

    assert [shape for shape, _ in forward.shapes] == [(1, 3, 4, 4), (3, 3, 4, 4)]


def test_augmented_or_embedding_passes_run_eagerly() -> None:
    eager = Eager()
    forward = TracedForward(eager)
    im = torch.rand(1, 3, 4, 4)

    forward(im, augment=True)
    forward(im, embed=[2])

    assert eager.kwargs == [{"augment": True, "embed": None}, {"augment": False, "embed": [2]}]
    assert forward.shapes == []


@pytest.mark.parametrize(
    ("output", "why"),
    [
        (lambda im: (im, 3), "not all tensors"),
        (lambda im: im + torch.rand_like(im), "differ"),  # not a function of its input alone
    ],
)
def test_a_forward_that_cannot_be_traced_the_same_runs_eagerly_from_then_on(
    output: Any, why: str
) -> None:
    calls = []

    def eager(im: Any, **kwargs: Any) -> Any:
        calls.append(im)
        return output(im)

    forward = TracedForward(eager)
    im = torch.rand(1, 3, 4, 4)

    forward(im)
    assert forward.given_up is not None
    assert why in forward.given_up
    before = len(calls)
    forward(im)
    assert len(calls) == before + 1
    assert forward.shapes == []


def test_the_cpu_lane_runs_the_pt_traced_with_the_eager_results(tmp_path: Path) -> None:
    ensure_ultralytics(tmp_path)
    path = build_checkpoint(tmp_path / "weights" / "tiny.pt")
    runner = YoloInferenceRunner(
        fixed_resolver({"tiny": ResolvedWeights(path, sha256_file(path))}), data_roots=[tmp_path]
    )
    images = make_images(tmp_path / "images", 8, seed=5)[::4]  # one shape

    def detail(job: str) -> Any:
        ctx = RecordingContext().context(tmp_path / job, images, imgsz=128)
        return runner.run(ctx).detail["images"]

    first = detail("first")  # the eager pass, traced on the way
    [model] = runner._cache._lane("cpu").idle.values()
    forward = model.predictor.model.backend.forward
    assert isinstance(forward, TracedForward)
    assert forward.given_up is None
    [(shape, _)] = forward.shapes
    assert shape[0] == len(images)  # one pass, one trace

    assert detail("traced") == first
    forward.given_up = "compared with the eager pass"
    assert detail("eager") == first
