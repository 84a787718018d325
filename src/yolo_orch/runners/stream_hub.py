"""Shared forward passes for the streams of one lane: one hub per lane, model and forward-pass
params, with one thread that puts the newest frame of every source of every stream attached to
it through one batched forward pass (up to the lane's `batch_max_images`; frames of one shape
share a pass), then hands each stream its frames' results. An inference job of the same model
and params on that lane puts its images through the same passes (`infer`).

The hub holds its model for as long as a stream is attached. A pass that fails fails every
stream attached (a model that cannot run is every stream's problem); what one stream makes of
its results (tracking, counting, writing) fails only that stream."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Protocol

from yolo_orch.domain import JsonObject
from yolo_orch.params.stream import StreamParams
from yolo_orch.runners.base import BatchRecord
from yolo_orch.runners.stream_capture import Frame

if TYPE_CHECKING:
    from yolo_orch.runners.stream_capture import Pixels

log = logging.getLogger(__name__)


class Follower(Protocol):
    """What one source's results become: its detections (tracked across its frames with
    `track`), and a frame drawn with them."""

    def detections(self, result: object, frame: Frame) -> list[JsonObject]: ...

    def annotated(self, result: object, frame: Frame) -> Pixels:
        """The frame with its detections drawn (for the snapshot)."""
        ...


class StreamModel(Protocol):
    """A model loaded on a lane for streams."""

    def predict(self, frames: Sequence[Pixels]) -> list[object]:
        """One forward pass over frames of one shape: a result each, in order."""
        ...

    def follower(self, params: StreamParams) -> Follower:
        """A new source's: its own tracker."""
        ...


LoadModel = Callable[[], AbstractContextManager[StreamModel]]


class Attendee(Protocol):
    """A stream, as its hub sees it."""

    job_id: str

    def take(self) -> list[Frame]:
        """The newest frame of each of its sources not taken yet."""
        ...

    def processed(self, frame: Frame, result: object, model: StreamModel, shared: bool) -> None:
        """`shared`: the pass also held other streams' frames."""
        ...

    def failed(self, error: Exception) -> None:
        """The hub's model could not be loaded or run: the stream ends with `error`."""
        ...


@dataclass
class _Item:
    """A frame or an image in a pass, and where its result goes."""

    job_id: str
    pixels: Pixels
    captured: float
    deliver: Callable[[object, StreamModel, bool], None]
    fail: Callable[[Exception], None]


class _Guest:
    """Inference jobs' images (each with its job's id), put through the hub's next pass."""

    def __init__(self, images: Sequence[tuple[str, Pixels]]) -> None:
        self.images = list(images)
        self.results: list[object] = [None] * len(images)
        self.error: Exception | None = None
        self.done = threading.Event()
        self._left = len(images)

    def items(self) -> list[_Item]:
        now = time.monotonic()
        return [
            _Item(job_id, image, now, partial(self._deliver, index), self.fail)
            for index, (job_id, image) in enumerate(self.images)
        ]

    def _deliver(self, index: int, result: object, model: StreamModel, shared: bool) -> None:
        self.results[index] = result
        self._left -= 1
        if self._left == 0:
            self.done.set()

    def fail(self, error: Exception) -> None:
        self.error = error
        self.done.set()


class StreamHub:
    def __init__(
        self,
        device: str,
        load: LoadModel,
        max_batch: int,
        on_pass: Callable[[BatchRecord], None],
        first: Attendee,
    ) -> None:
        """`first`: attached before the thread starts, so that a load that fails at once
        fails it too (it would else wait, attached to a stopped hub, for frames never taken)."""
        self.device = device
        self._load = load
        self._max_batch = max(1, max_batch)
        self._on_pass = on_pass
        self._attendees: list[Attendee] = [first]
        self._guests: list[_Guest] = []
        self._changed = threading.Condition()
        self._frames_waiting = False
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=f"stream hub {device}", daemon=True)
        self._thread.start()

    @property
    def stopped(self) -> bool:
        return self._stopped

    def attach(self, attendee: Attendee) -> None:
        with self._changed:
            self._attendees.append(attendee)

    def detach(self, attendee: Attendee) -> bool:
        """Whether it was the last: the hub then stops and lets its model go."""
        with self._changed:
            if attendee in self._attendees:
                self._attendees.remove(attendee)
            if not self._attendees:
                self._stopped = True
            self._changed.notify()
            return self._stopped

    def frame_ready(self) -> None:
        """A source took a frame (called from its capture thread)."""
        with self._changed:
            self._frames_waiting = True
            self._changed.notify()

    def infer(self, images: Sequence[tuple[str, Pixels]]) -> list[object] | None:
        """Blocking: inference jobs' images (each with its job's id; jobs of the streams' model
        and forward-pass params) through the hub's next passes, beside the streams' frames;
        their results in order. None when the hub has stopped (the jobs then run their own
        passes)."""
        guest = _Guest(images)
        with self._changed:
            if self._stopped:
                return None
            self._guests.append(guest)
            self._frames_waiting = True
            self._changed.notify()
        guest.done.wait()
        if guest.error is not None:
            raise guest.error
        return guest.results

    def _next_items(self) -> list[_Item] | None:
        """What waits for a pass, oldest first; None once the hub stops."""
        with self._changed:
            while not self._frames_waiting and not self._stopped:
                self._changed.wait()
            if self._stopped:
                return None
            self._frames_waiting = False
            attendees, guests, self._guests = list(self._attendees), self._guests, []
        items = [item for guest in guests for item in guest.items()]
        for attendee in attendees:
            for frame in attendee.take():
                deliver = partial(_processed, attendee, frame)
                items.append(
                    _Item(attendee.job_id, frame.pixels, frame.captured, deliver, attendee.failed)
                )
        return sorted(items, key=lambda item: item.captured)

    def _run(self) -> None:
        try:
            with self._load() as model:
                while (items := self._next_items()) is not None:
                    for start in range(0, len(items), self._max_batch):
                        for group in _same_shape(items[start : start + self._max_batch]):
                            self._pass(model, group)
        except Exception as error:
            log.exception("the stream model on %s failed", self.device)
            with self._changed:
                self._stopped = True
                attendees, guests, self._guests = list(self._attendees), self._guests, []
            for guest in guests:
                guest.fail(error)
            for attendee in attendees:
                attendee.failed(error)

    def _pass(self, model: StreamModel, group: list[_Item]) -> None:
        results = model.predict([item.pixels for item in group])
        job_ids = tuple(dict.fromkeys(item.job_id for item in group))
        self._on_pass(BatchRecord(job_ids, len(group)))
        shared = len(job_ids) > 1
        for item, result in zip(group, results, strict=True):
            try:
                item.deliver(result, model, shared)
            except Exception as error:  # its own: the others go on
                item.fail(error)


def _processed(
    attendee: Attendee, frame: Frame, result: object, model: StreamModel, shared: bool
) -> None:
    attendee.processed(frame, result, model, shared)


def _same_shape(items: list[_Item]) -> list[list[_Item]]:
    groups: dict[tuple[int, ...], list[_Item]] = {}
    for item in items:
        groups.setdefault(tuple(item.pixels.shape), []).append(item)
    return list(groups.values())


class StreamHubs:
    """The hubs of a runtime, by lane and what their streams share (`stream_key`); the
    forward passes that held frames of more than one stream (the last 1000)."""

    def __init__(self, max_batch: Callable[[str], int]) -> None:
        self._max_batch = max_batch
        self._lock = threading.Lock()
        self._hubs: dict[tuple[str, Hashable], StreamHub] = {}
        self._batches: deque[BatchRecord] = deque(maxlen=1000)

    def join(self, device: str, key: Hashable, attendee: Attendee, load: LoadModel) -> StreamHub:
        with self._lock:
            hub = self._hubs.get((device, key))
            if hub is None or hub.stopped:  # a hub whose model failed takes no one new
                hub = StreamHub(device, load, self._max_batch(device), self._noted, attendee)
                self._hubs[(device, key)] = hub
            else:
                hub.attach(attendee)
            return hub

    def find(self, device: str, key: Hashable) -> StreamHub | None:
        """The running hub of `device` for `key`, if streams are on it."""
        with self._lock:
            hub = self._hubs.get((device, key))
            return None if hub is None or hub.stopped else hub

    def leave(self, hub: StreamHub, attendee: Attendee) -> None:
        with self._lock:
            if hub.detach(attendee):
                self._hubs = {key: known for key, known in self._hubs.items() if known is not hub}

    def _noted(self, record: BatchRecord) -> None:
        if len(record.job_ids) > 1:
            with self._lock:
                self._batches.append(record)

    @property
    def batches(self) -> list[BatchRecord]:
        with self._lock:
            return list(self._batches)
