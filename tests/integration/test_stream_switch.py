"""A stream's switch of model between two frames, on real hubs with stand-in models: the old model
serves the stream while the new one loads, every frame taken is processed, in order, the first
frames by the old model and the rest by the new, and the old hub lets its model go."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import numpy as np

from yolo_orch.domain.aliases import AliasMove
from yolo_orch.runners.stream_capture import Frame
from yolo_orch.runners.stream_hub import Follower, LoadModel, StreamHubs, StreamModel
from yolo_orch.runners.stream_switch import AliasWatch, Switchboard
from yolo_orch.testing import wait_for as wait_until


def wait_for(check: Any) -> None:
    wait_until(check, 10, "a stream's frames", interval=0.005)


class Model:
    def __init__(self, name: str) -> None:
        self.name = name

    def predict(self, frames: Sequence[Any]) -> list[object]:
        time.sleep(0.005)  # a pass takes a while: frames come meanwhile
        return [self.name] * len(frames)

    def follower(self, params: Any) -> Follower:
        raise NotImplementedError


class Stream:
    """Frames numbered 0, 1, 2...: each `take_frames` reads the next one."""

    def __init__(self) -> None:
        self.job_id = "job-1"
        self.changed = threading.Event()
        self._numbers = itertools.count()
        self._lock = threading.Lock()
        self.taken: list[int] = []
        self.written: list[tuple[int, object, str | None]] = []
        self.error: Exception | None = None

    def take_frames(self) -> list[Frame]:
        with self._lock:
            number = next(self._numbers)
            self.taken.append(number)
        pixels = np.zeros((8, 8, 3), dtype=np.uint8)
        return [Frame(0, number, time.time(), time.monotonic(), pixels)]

    def write(
        self, frame: Frame, result: object, model: StreamModel, shared: bool, model_id: str | None
    ) -> None:
        with self._lock:
            self.written.append((frame.number, result, model_id))

    def failed(self, error: Exception) -> None:
        self.error = error


def loader(model: Model, released: threading.Event, loaded: threading.Event) -> LoadModel:
    @contextmanager
    def load() -> Iterator[StreamModel]:
        loaded.wait(5)  # a load takes as long as the test says
        try:
            yield model
        finally:
            released.set()

    return load


def feed(board: Switchboard, stop: threading.Event) -> None:
    while not stop.is_set():
        board.frame_ready()
        time.sleep(0.002)


def test_a_stream_switches_model_between_two_frames_without_losing_one() -> None:
    hubs = StreamHubs(max_batch=lambda lane: 4)
    stream = Stream()
    board = Switchboard(stream, "model-a")
    old_released, new_released, new_loaded = threading.Event(), threading.Event(), threading.Event()
    ready = threading.Event()
    ready.set()
    board.active.hub = hubs.join(
        "sim:0", "a", board.active, loader(Model("a"), old_released, ready)
    )
    stop = threading.Event()
    feeding = threading.Thread(target=feed, args=(board, stop))
    feeding.start()
    try:
        wait_for(lambda: len(stream.written) >= 5)
        board.want("model-b")
        assert board.next_model() == "model-b"
        seat = board.seat("model-b")
        seat.hub = hubs.join("sim:0", "b", seat, loader(Model("b"), new_released, new_loaded))
        served_while_loading = len(stream.written)
        wait_for(lambda: len(stream.written) >= served_while_loading + 5)  # still model a
        assert board.handed_over() == []

        new_loaded.set()
        wait_for(lambda: board.pending is None)
        (old, new), *_ = board.handed_over()
        assert old.hub is not None
        hubs.leave(old.hub, old)
        wait_for(lambda: sum(model_id == "model-b" for *_, model_id in stream.written) >= 5)
    finally:
        stop.set()
        feeding.join()
    for left in (board.active, board.pending):
        if left is not None and left.hub is not None:
            hubs.leave(left.hub, left)
    wait_for(lambda: len(stream.written) == len(stream.taken))

    numbers = [number for number, *_ in stream.written]
    models = [model_id for *_, model_id in stream.written]
    switch_at = models.index("model-b")
    assert numbers == sorted(numbers)  # in order, across the switch
    assert numbers == stream.taken  # every frame taken was processed
    assert set(models[:switch_at]) == {"model-a"}
    assert set(models[switch_at:]) == {"model-b"}
    assert all(result == model_id[-1] for _, result, model_id in stream.written if model_id)
    assert (new.model_id, board.active is new) == ("model-b", True)
    assert old_released.is_set()
    assert stream.error is None


def test_a_model_that_cannot_load_leaves_the_stream_on_its_model() -> None:
    hubs = StreamHubs(max_batch=lambda lane: 4)
    stream = Stream()
    board = Switchboard(stream, "model-a")
    ready = threading.Event()
    ready.set()
    board.active.hub = hubs.join("sim:0", "a", board.active, loader(Model("a"), ready, ready))

    @contextmanager
    def broken() -> Iterator[StreamModel]:
        raise RuntimeError("no such weights")
        yield  # a generator, as a load is

    seat = board.seat("model-b")
    seat.hub = hubs.join("sim:0", "b", seat, broken)
    wait_for(lambda: board.pending is None)
    board.frame_ready()
    wait_for(lambda: len(stream.written) >= 1)

    ((refused, error),) = board.refused()
    assert (refused.model_id, str(error)) == ("model-b", "no such weights")
    assert board.active.model_id == "model-a"
    assert stream.error is None
    assert board.active.hub is not None
    hubs.leave(board.active.hub, board.active)


def test_the_alias_watch_tells_the_streams_that_follow_the_moved_alias() -> None:
    watch = AliasWatch()
    heard: list[str] = []
    unfollow = watch.follow("detector@production", heard.append)
    at = datetime.now(UTC)

    def move(alias: str, to: str | None) -> AliasMove:
        return AliasMove(1, "detector", alias, "m1", to, "ops", None, at)

    watch.moved(move("production", "m2"))
    watch.moved(move("staging", "m3"))
    watch.moved(move("production", None))  # deleted: the streams keep their model
    unfollow()
    watch.moved(move("production", "m4"))

    assert heard == ["m2"]
