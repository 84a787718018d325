"""The `.pt`'s forward pass on the cpu lane run as TorchScript traces, one per input shape.

Why: an eager forward pass lets go of the GIL inside each op and takes it back after, a few
hundred times a pass for a small YOLO model. In the server's process the event loop, the store's
writer and the jobs' file writes hold the GIL now and then, and whenever an op ends while one of
them does, the pass waits for it. On 2 cores, beside a Python thread busy 20 % of the time, a
batch-8 pass of yolo11n at imgsz 320 took 215 ms eagerly against 148 ms alone; its trace took
156 against 145: a trace runs the whole pass in C++ after one release. (`bench.small_jobs`: in
the server a batch of eight 1-image jobs took 38 ms an image, 25 in a process of its own.)

A trace records the ops one input shape ran. The Python of a YOLO forward pass depends only on
shapes (the Detect head's anchors; checked for each shipped task's head in ultralytics 8.4), so
one trace per (shape, dtype) runs what the eager pass would. Each trace is checked on its first
input: unless its outputs are bit for bit the eager pass's, the model is never traced again and
runs eagerly, as it does when tracing fails. Passes asking for augmentation or embeddings run
eagerly.

`torch.jit.trace` is deprecated in favour of `torch.export` and `torch.compile`; an exported
program still runs op by op from Python, and `torch.compile` needs a C++ compiler at run time.
"""

from __future__ import annotations

import logging
import warnings
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from torch.utils._pytree import TreeSpec
    from ultralytics.models import YOLO

__all__ = ["MAX_SHAPES", "TracedForward", "trace_forward"]

log = logging.getLogger(__name__)

MAX_SHAPES = 32
"""Traces kept per model, least recently used dropped first: a shape is a batch size and a
letterboxed image size, so batches of 1 to 8 images of one aspect ratio make 8."""

_ShapeKey = tuple[tuple[int, ...], "torch.dtype"]


def trace_forward(model: YOLO) -> TracedForward | None:
    """Run `model`'s forward passes as traces from now on, when its predictor (set up by a first
    predict) runs the `.pt` through ultralytics' PyTorch backend; the wrapper, or None."""
    from ultralytics.nn.backends.pytorch import PyTorchBackend

    backend = getattr(getattr(model.predictor, "model", None), "backend", None)
    if not isinstance(backend, PyTorchBackend):
        return None
    traced = TracedForward(backend.forward)
    backend.forward = traced  # type: ignore[method-assign]  # this instance's only
    return traced


class TracedForward:
    """Stands in for a backend's `forward(im, augment, embed, **kwargs)`. Not thread-safe: a
    model instance runs one job at a time (`model_cache`)."""

    def __init__(self, eager: Callable[..., Any], max_shapes: int = MAX_SHAPES) -> None:
        self._eager = eager
        self._max_shapes = max_shapes
        self._traces: OrderedDict[_ShapeKey, _Trace] = OrderedDict()
        self.given_up: str | None = None
        """Why this model runs eagerly from now on; None while it is traced."""

    @property
    def shapes(self) -> list[_ShapeKey]:
        """The (shape, dtype) of each trace kept, least recently used first."""
        return list(self._traces)

    def __call__(
        self, im: torch.Tensor, augment: bool = False, embed: list[int] | None = None, **kwargs: Any
    ) -> Any:
        if self.given_up is not None or augment or embed or kwargs:
            return self._eager(im, augment=augment, embed=embed, **kwargs)
        key = (tuple(im.shape), im.dtype)
        trace = self._traces.get(key)
        if trace is None:
            return self._first(key, im)
        self._traces.move_to_end(key)
        return trace.run(im)

    def _first(self, key: _ShapeKey, im: torch.Tensor) -> Any:
        """The eager pass's outputs for a new shape, traced and the trace checked on the way."""
        import torch
        from torch.utils._pytree import tree_flatten

        expected = self._eager(im)
        leaves, spec = tree_flatten(expected)
        if not all(isinstance(leaf, torch.Tensor) for leaf in leaves):
            self._give_up("its outputs are not all tensors")
            return expected

        def flat(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return tuple(tree_flatten(self._eager(x))[0])

        try:
            with warnings.catch_warnings():
                # The deprecation, and TracerWarnings about the head's shape checks, which one
                # trace per shape makes right.
                warnings.simplefilter("ignore")
                traced = torch.jit.trace(  # type: ignore[no-untyped-call]
                    flat, (im,), check_trace=False, strict=False
                )
                got = traced(im)
        except Exception as exc:  # any failure means: run eagerly
            self._give_up(f"tracing failed: {type(exc).__name__}: {exc}")
            return expected
        if len(got) != len(leaves) or not all(
            torch.equal(a, b) for a, b in zip(got, leaves, strict=True)
        ):
            self._give_up("its trace's outputs differ from the eager pass's")
            return expected
        self._traces[key] = _Trace(traced, spec)
        if len(self._traces) > self._max_shapes:
            self._traces.popitem(last=False)
        return expected

    def _give_up(self, why: str) -> None:
        self.given_up = why
        self._traces.clear()
        log.warning("the model's forward pass runs eagerly from now on: %s", why)


class _Trace:
    def __init__(self, traced: Callable[[torch.Tensor], Any], spec: TreeSpec) -> None:
        self._traced = traced
        self._spec = spec

    def run(self, im: torch.Tensor) -> Any:
        from torch.utils._pytree import tree_unflatten

        return tree_unflatten(list(self._traced(im)), self._spec)
