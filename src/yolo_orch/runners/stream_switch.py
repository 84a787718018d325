"""A running stream's switch to another model between two frames, when an alias it names
(`name@alias`) moves: no reconnect of its sources, and no frame taken that is not processed.

A stream takes part in its hub's passes through a `Seat`, one per hub. On a move, the runner's
thread loads the new model: it seats the stream at the hub of that model (a new hub loads it on
its own thread; an existing one has it loaded already) while the old hub goes on with the
stream's frames. The new hub's first request for frames says that its model is ready: from
then on the old hub is given no frame, and once the frames it holds are processed the new seat
becomes the stream's, at the next frame. Each frame records the model that made it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from yolo_orch.domain.aliases import AliasMove

if TYPE_CHECKING:
    from yolo_orch.runners.stream_capture import Frame
    from yolo_orch.runners.stream_hub import StreamHub, StreamModel

log = logging.getLogger(__name__)


class AliasWatch:
    """Which running streams name which alias (`name@alias`), told of each committed move on
    the event loop (`AliasRegistry.on_move`); the streams' threads follow and unfollow."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._followers: dict[str, list[Callable[[str], None]]] = {}

    def follow(self, ref: str, moved: Callable[[str], None]) -> Callable[[], None]:
        """Call `moved` with the model id of each later move of `ref`; returns the unfollow."""
        with self._lock:
            self._followers.setdefault(ref, []).append(moved)

        def unfollow() -> None:
            with self._lock:
                followers = self._followers.get(ref, [])
                if moved in followers:
                    followers.remove(moved)
                if not followers:
                    self._followers.pop(ref, None)

        return unfollow

    def moved(self, move: AliasMove) -> None:
        """A deleted alias (no target) changes nothing for the streams that run its model."""
        if move.to_model_id is None:
            return
        with self._lock:
            followers = list(self._followers.get(f"{move.name}@{move.alias}", []))
        for moved in followers:
            moved(move.to_model_id)


class SeatedStream(Protocol):
    """What a switchboard serves: the stream job's own work (`stream._Session`)."""

    job_id: str
    changed: threading.Event

    def take_frames(self) -> list[Frame]: ...

    def write(
        self, frame: Frame, result: object, model: StreamModel, shared: bool, model_id: str | None
    ) -> None: ...

    def failed(self, error: Exception) -> None: ...


class Seat:
    """A stream at one hub (`stream_hub.Attendee`), with the model that hub runs."""

    def __init__(self, board: Switchboard, model_id: str | None) -> None:
        self.job_id = board.job_id
        self.model_id = model_id
        self.hub: StreamHub | None = None
        self._board = board

    def take(self) -> list[Frame]:
        return self._board.take(self)

    def processed(self, frame: Frame, result: object, model: StreamModel, shared: bool) -> None:
        self._board.processed(self, frame, result, model, shared)

    def failed(self, error: Exception) -> None:
        self._board.failed(self, error)


class Switchboard:
    """Which of a stream's seats is given its frames. The hubs call in from their threads, the
    runner's thread seats and unseats, the event loop asks for a model (`want`)."""

    def __init__(self, stream: SeatedStream, model_id: str | None) -> None:
        self.job_id = stream.job_id
        self._stream = stream
        self._lock = threading.Lock()
        self.active = Seat(self, model_id)
        self.pending: Seat | None = None
        self._ready = False
        """The pending seat's hub has its model: the active one gets no more frames."""
        self._in_flight = 0
        """Frames the active seat's hub took and has not processed yet."""
        self._wanted: str | None = None
        self._handed_over: list[tuple[Seat, Seat]] = []
        self._refused: list[tuple[Seat, Exception]] = []

    def want(self, model_id: str) -> None:
        """Switch to `model_id` (from any thread; the runner's thread does it)."""
        with self._lock:
            self._wanted = model_id
        self._stream.changed.set()

    def next_model(self) -> str | None:
        """The model to switch to now, if one is wanted and no switch is under way."""
        with self._lock:
            wanted, self._wanted = self._wanted, None
            if wanted is None or wanted == self.active.model_id:
                return None
            if self.pending is not None:
                self._wanted = wanted  # after the switch under way
                return None
            return wanted

    def seat(self, model_id: str) -> Seat:
        """A seat for `model_id`, pending until its hub asks for frames; join it to that hub."""
        seat = Seat(self, model_id)
        with self._lock:
            self.pending = seat
        return seat

    def handed_over(self) -> list[tuple[Seat, Seat]]:
        """The switches done since the last call: (old seat, new seat) each."""
        with self._lock:
            done, self._handed_over = self._handed_over, []
        return done

    def refused(self) -> list[tuple[Seat, Exception]]:
        """The pending seats whose hub failed (their model could not load) since the last call."""
        with self._lock:
            failed, self._refused = self._refused, []
        return failed

    def frame_ready(self) -> None:
        """A source took a frame: both hubs hear of it during a switch."""
        for seat in (self.active, self.pending):
            if seat is not None and seat.hub is not None:
                seat.hub.frame_ready()

    def take(self, seat: Seat) -> list[Frame]:
        with self._lock:
            if seat is self.pending:
                self._ready = True
                if self._in_flight:
                    return []  # the old model's frames first
                self._handed_over.append((self.active, seat))
                self.active, self.pending, self._ready = seat, None, False
                self._stream.changed.set()
            elif seat is not self.active or self._ready:
                return []
            frames = self._stream.take_frames()
            self._in_flight += len(frames)
            return frames

    def processed(
        self, seat: Seat, frame: Frame, result: object, model: StreamModel, shared: bool
    ) -> None:
        try:
            self._stream.write(frame, result, model, shared, seat.model_id)
        finally:
            with self._lock:
                self._in_flight -= 1
                waiting = self.pending if self._ready and not self._in_flight else None
            if waiting is not None and waiting.hub is not None:
                waiting.hub.frame_ready()  # its model may take the next frame now

    def failed(self, seat: Seat, error: Exception) -> None:
        with self._lock:
            if seat is self.pending:
                self.pending, self._ready = None, False
                self._refused.append((seat, error))
                self._stream.changed.set()
                return
            if seat is not self.active:
                return  # a hub the stream has left
        self._stream.failed(error)
