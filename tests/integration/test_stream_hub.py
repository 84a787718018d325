"""A lane's stream hub: frames of all its streams in one pass (up to its batch), a model that
fails fails every stream on it, a stream whose own handling fails fails alone, and the hub lets
its model go once its last stream leaves."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from yolo_orch.runners.stream_capture import Frame
from yolo_orch.runners.stream_hub import Follower, StreamHubs, StreamModel
from yolo_orch.testing import wait_for


class Model:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.passes: list[int] = []

    def predict(self, frames: Sequence[Any]) -> list[object]:
        if self.fail:
            raise RuntimeError("the model broke")
        self.passes.append(len(frames))
        return [len(frames)] * len(frames)

    def follower(self, params: Any) -> Follower:
        raise NotImplementedError


class Stream:
    def __init__(self, job_id: str, frames: int, fail_on: int | None = None) -> None:
        self.job_id = job_id
        self._waiting = [_frame(i) for i in range(frames)]
        self._fail_on = fail_on
        self.results: list[object] = []
        self.error: Exception | None = None
        self.shared = 0

    def take(self) -> list[Frame]:
        taken, self._waiting = self._waiting[:1], self._waiting[1:]
        return taken

    def processed(self, frame: Frame, result: object, model: StreamModel, shared: bool) -> None:
        if frame.number == self._fail_on:
            raise ValueError("this stream's own trouble")
        self.results.append(result)
        self.shared += shared

    def failed(self, error: Exception) -> None:
        self.error = error


def _frame(number: int) -> Frame:
    return Frame(0, number, time.time(), time.monotonic(), np.zeros((8, 8, 3), dtype=np.uint8))


def loader(model: Model, released: threading.Event) -> Any:
    @contextmanager
    def load() -> Iterator[StreamModel]:
        try:
            yield model
        finally:
            released.set()

    return load


def test_the_streams_of_a_hub_share_its_passes_and_it_lets_the_model_go_at_the_end() -> None:
    hubs = StreamHubs(max_batch=lambda lane: 8)
    model, released = Model(), threading.Event()
    first, second = Stream("a", frames=5), Stream("b", frames=5)
    hub = hubs.join("sim:0", "key", first, loader(model, released))
    assert hubs.join("sim:0", "key", second, loader(Model(), threading.Event())) is hub
    for _ in range(5):
        hub.frame_ready()
        wait_for(lambda: not hub._frames_waiting, 5, "the pass")
    wait_for(lambda: len(first.results) == len(second.results) == 5, 5, "every frame")
    assert first.shared == second.shared == 5
    assert [record.job_ids for record in hubs.batches] == [("a", "b")] * 5
    hubs.leave(hub, first)
    assert not released.is_set()
    hubs.leave(hub, second)
    wait_for(released.is_set, 5, "the model let go")


def test_a_failing_model_fails_every_stream_and_a_stream_fails_alone() -> None:
    hubs = StreamHubs(max_batch=lambda lane: 8)
    alone, fine = Stream("a", frames=3, fail_on=1), Stream("b", frames=3)
    hub = hubs.join("sim:0", "k", alone, loader(Model(), threading.Event()))
    hubs.join("sim:0", "k", fine, loader(Model(), threading.Event()))
    for _ in range(3):
        hub.frame_ready()
        wait_for(lambda: not hub._frames_waiting, 5, "the pass")
    wait_for(lambda: len(fine.results) == 3, 5, "the other stream's frames")
    assert isinstance(alone.error, ValueError)
    assert fine.error is None

    broken = [Stream("c", frames=1), Stream("d", frames=1)]
    other = hubs.join("sim:0", "broken", broken[0], loader(Model(fail=True), threading.Event()))
    hubs.join("sim:0", "broken", broken[1], loader(Model(), threading.Event()))
    other.frame_ready()
    wait_for(lambda: all(s.error is not None for s in broken), 5, "both failed")
    assert other.stopped
    # a new stream of that key gets a new hub, not the failed one
    assert (
        hubs.join("sim:0", "broken", Stream("e", 0), loader(Model(), threading.Event()))
        is not other
    )
