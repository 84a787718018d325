"""The ultralytics model a stream hub runs (its `.pt` or a variant, from the lane's model cache,
as an inference job would run it), and what each source makes of its results: its detections,
in the model task's shape, tracked across the source's frames with `track`."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from typing import TYPE_CHECKING

from yolo_orch.domain import JsonObject
from yolo_orch.params.inference import InferenceParams
from yolo_orch.params.stream import StreamParams
from yolo_orch.runners.encode import Encoding, ImageOutput, encode
from yolo_orch.runners.predict import predict_batch
from yolo_orch.runners.tracking import FrameTracker

if TYPE_CHECKING:
    from pathlib import Path

    from ultralytics.engine.results import Results
    from ultralytics.models import YOLO

    from yolo_orch.runners.base import RunContext
    from yolo_orch.runners.inference import YoloInferenceRunner
    from yolo_orch.runners.stream import LoadStreamModel
    from yolo_orch.runners.stream_capture import Frame, Pixels
    from yolo_orch.runners.stream_hub import Follower, LoadModel, StreamModel


def yolo_stream_models(runner: YoloInferenceRunner) -> LoadStreamModel:
    """Stream models from the inference runner's lane caches (`YoloInferenceRunner.checkout`)."""

    def resolve(device: str, ctx: RunContext, params: StreamParams) -> LoadModel:
        checkout = runner.checkout(device, ctx.job.model_id or ctx.job.model, params.forward_pass())

        @contextmanager
        def load() -> Iterator[StreamModel]:
            with checkout() as model:
                task = str(model.task)
                yield YoloStreamModel(model, device, params, task, ctx.workdir / "artifacts")

        return load

    return resolve


class YoloStreamModel:
    def __init__(
        self, model: YOLO, device: str, params: StreamParams, task: str, scratch: Path
    ) -> None:
        """`scratch`: where an encoder would write an artifact (never, for `STREAM_TASKS`)."""
        self._model = model
        self._device = device
        self._params = InferenceParams.model_validate(params.forward_pass().model_dump())
        self._task = task
        self._scratch = scratch

    def predict(self, frames: Sequence[Pixels]) -> list[object]:
        items = list(enumerate(frames))
        with closing(predict_batch(self._model, items, self._device, self._params)) as results:
            return [result for _, result in results]

    def follower(self, params: StreamParams) -> Follower:
        tracker = (
            FrameTracker(params.track, params.tracker, self._task, self._device, spans=False)
            if params.track is not None
            else None
        )
        metadata = self._model.predictor.model if self._model.predictor else self._model.model
        encoding = Encoding.of(self._task, self._params, metadata)
        return _YoloFollower(tracker, encoding, ImageOutput(self._scratch, 0, "frame"))


class _YoloFollower:
    def __init__(
        self, tracker: FrameTracker | None, encoding: Encoding, output: ImageOutput
    ) -> None:
        self._tracker = tracker
        self._encoding = encoding
        self._output = output
        self._last: Results | None = None

    def detections(self, result: object, frame: Frame) -> list[JsonObject]:
        found = _results(result)
        if self._tracker is not None:
            found = self._tracker.update(found, frame.number)
        self._last = found
        entry = encode(found, self._encoding, self._output)
        listed: list[JsonObject] = entry.get("detections") or entry.get("classes") or []
        return listed

    def annotated(self, result: object, frame: Frame) -> Pixels:
        """The frame with its last detections drawn (tracked ones, with their ids)."""
        shown = self._last if self._last is not None else _results(result)
        drawn: Pixels = shown.plot()
        return drawn


def _results(result: object) -> Results:
    from ultralytics.engine.results import Results

    if not isinstance(result, Results):
        raise TypeError(f"a stream model returned a {type(result).__name__}")
    return result
