"""Uploads decoded while their jobs wait: what a lane takes is what its own decode would give,
memory stays within the budget, and what is not taken in time is dropped."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from yolo_orch.runners.decode_ahead import DecodeAhead

Pixels = NDArray[np.uint8]
IMAGE_BYTES = 4 * 4 * 3


class Decoder:
    """Decodes a file to 4x4 pixels of its name's length; "bad" files cannot be decoded."""

    def __init__(self) -> None:
        self.calls: list[Path] = []
        self.gate = threading.Event()
        self.gate.set()

    def __call__(self, path: Path) -> Pixels | str:
        self.gate.wait(10)
        self.calls.append(path)
        if path.name.startswith("bad"):
            return "cannot decode the file as an image"
        if path.name.startswith("raise"):
            raise MemoryError("no room")
        return np.full((4, 4, 3), len(path.name), np.uint8)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def ahead(decoder: Decoder, max_bytes: int = 1 << 20, clock: Clock | None = None) -> DecodeAhead:
    return DecodeAhead(decoder, max_bytes, threads=1, clock=clock or Clock())


def test_a_lane_takes_the_pixels_its_own_decode_would_give_once() -> None:
    decoder = Decoder()
    pool = ahead(decoder)
    pool.start([Path("/up/a.jpg"), Path("/up/bb.jpg")])
    first, second = pool.take(Path("/up/a.jpg")), pool.take(Path("/up/bb.jpg"))
    assert isinstance(first, np.ndarray)
    assert isinstance(second, np.ndarray)
    assert np.array_equal(first, np.full((4, 4, 3), len("a.jpg"), np.uint8))
    assert int(second[0, 0, 0]) == len("bb.jpg")
    assert pool.take(Path("/up/a.jpg")) is None, "taken once: a rerun decodes the file itself"
    assert pool.take(Path("/up/never.jpg")) is None
    assert pool.taken == 2
    assert pool.held_bytes == 0


def test_a_take_waits_for_the_decode_under_way() -> None:
    decoder = Decoder()
    decoder.gate.clear()
    pool = ahead(decoder)
    pool.start([Path("/up/a.jpg")])
    threading.Timer(0.2, decoder.gate.set).start()
    assert isinstance(pool.take(Path("/up/a.jpg")), np.ndarray)
    assert decoder.calls == [Path("/up/a.jpg")], "decoded once, by the pool"


def test_why_a_file_cannot_be_decoded_is_handed_over_and_a_crash_leaves_it_to_the_lane() -> None:
    pool = ahead(Decoder())
    pool.start([Path("/up/bad.jpg"), Path("/up/raise.jpg")])
    assert pool.take(Path("/up/bad.jpg")) == "cannot decode the file as an image"
    assert pool.take(Path("/up/raise.jpg")) is None
    assert pool.taken == 0, "only pixels count as decoded ahead"


def test_past_the_budget_nothing_more_is_decoded_until_pixels_are_taken() -> None:
    decoder = Decoder()
    pool = ahead(decoder, max_bytes=IMAGE_BYTES)
    pool.start([Path("/up/a.jpg"), Path("/up/b.jpg")])
    assert isinstance(pool.take(Path("/up/a.jpg")), np.ndarray)
    assert pool.take(Path("/up/b.jpg")) is None, "the budget was full when its turn came"
    assert decoder.calls == [Path("/up/a.jpg")]
    pool.start([Path("/up/c.jpg")])
    assert isinstance(pool.take(Path("/up/c.jpg")), np.ndarray), "taking freed the budget"


def test_pixels_not_taken_in_time_are_dropped_and_free_the_budget() -> None:
    clock = Clock()
    pool = DecodeAhead(Decoder(), IMAGE_BYTES, threads=1, ttl_s=60, clock=clock)
    pool.start([Path("/up/cancelled.jpg")])
    while pool.held_bytes == 0:  # decoded, holding the whole budget
        threading.Event().wait(0.01)
    clock.now = 61
    pool.start([Path("/up/next.jpg")])
    assert pool.take(Path("/up/cancelled.jpg")) is None
    assert isinstance(pool.take(Path("/up/next.jpg")), np.ndarray)
    assert pool.held_bytes == 0


def test_a_budget_of_zero_decodes_nothing() -> None:
    decoder = Decoder()
    pool = ahead(decoder, max_bytes=0)
    pool.start([Path("/up/a.jpg")])
    assert pool.take(Path("/up/a.jpg")) is None
    assert decoder.calls == []
