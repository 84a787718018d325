"""Uploaded images decoded while their jobs wait in the queue, so that the lane finds their pixels
ready instead of decoding them between forward passes.

A lane's thread decodes a job's images before their pass and runs no model meanwhile: for
1-image jobs batched 8 at a time on the cpu lane, decoding took a fifth of the lane's time
(bench.small_jobs, 640x480 JPEGs, 4.6 ms each in the server). Decoding an upload on a small pool
of its own as soon as its job is accepted moves that work onto cores the lane is not using, as a
data loader's workers do for training.

The pixels are the same as the lane's own decode would give: the pool runs the runner's decode
function (`decode.decode_image`, with its header check and its `max_image_pixels`) on the file
the upload was saved to. What the pool has not decoded, or dropped, the lane decodes itself:
- memory is bounded: while the pixels held reach `max_bytes`, the pool decodes nothing more (it
  may pass the bound by the images it is decoding at that moment);
- an entry not taken within `ttl_s` is dropped when the next upload starts (its job was
  cancelled, or waits behind a long queue), so that it does not hold memory that newer uploads
  could use; until then a lane may still take it;
- nothing is kept across a restart: a job recovered after one decodes its files as always.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Pixels = NDArray[np.uint8]

__all__ = ["AHEAD_TTL_S", "DecodeAhead", "default_threads"]

AHEAD_TTL_S = 60.0
"""How long decoded pixels wait for their job's lane before they are dropped."""


@dataclass
class _Entry:
    at: float
    future: Future[Pixels | str | None] | None = None
    nbytes: int = 0
    """What its pixels count against the budget, once decoded."""
    dropped: bool = False


class DecodeAhead:
    """`start` (from the event loop: it never blocks) queues files for decoding; `take` (from a
    lane's thread) hands their pixels over, or None when the lane must decode the file itself."""

    def __init__(
        self,
        decode: Callable[[Path], Pixels | str],
        max_bytes: int,
        threads: int,
        *,
        ttl_s: float = AHEAD_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`decode`: a file's pixels, or why it cannot be decoded (the runner's own decode).
        `max_bytes` 0: nothing is decoded ahead."""
        self._decode = decode
        self._max_bytes = max_bytes
        self._ttl_s = ttl_s
        self._clock = clock
        self._pool = None
        if max_bytes > 0:
            self._pool = ThreadPoolExecutor(threads, thread_name_prefix="decode-ahead")
        self._entries: OrderedDict[Path, _Entry] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()
        self.taken = 0
        """Images a lane found decoded, since start."""

    @property
    def held_bytes(self) -> int:
        """Pixels decoded and not yet taken."""
        with self._lock:
            return self._held

    def start(self, paths: Iterable[Path]) -> None:
        """Decode these files (an accepted job's uploads) on the pool, as its threads free up."""
        if self._pool is None:
            return
        with self._lock:
            self._drop_expired()
            for path in paths:
                if path in self._entries:
                    continue
                entry = _Entry(self._clock())
                self._entries[path] = entry
                entry.future = self._pool.submit(self._decode_into, path, entry)

    def take(self, path: Path) -> Pixels | str | None:
        """The file's pixels, or why it cannot be decoded, as `decode` said; waits while the pool
        is decoding it. None when it was never started, was dropped or not decoded (the budget
        was full): the caller decodes it then."""
        with self._lock:
            entry = self._entries.pop(path, None)
        if entry is None or entry.future is None:
            return None
        try:
            decoded = entry.future.result()
        except Exception:  # the caller's own decode says what is wrong
            decoded = None
        with self._lock:
            self._held -= entry.nbytes
            if decoded is not None and not isinstance(decoded, str):
                self.taken += 1
        return decoded

    def _decode_into(self, path: Path, entry: _Entry) -> Pixels | str | None:
        with self._lock:
            if entry.dropped or self._held >= self._max_bytes:
                return None
        decoded = self._decode(path)
        if isinstance(decoded, str):
            return decoded
        with self._lock:
            if entry.dropped:
                return None
            entry.nbytes = decoded.nbytes
            self._held += entry.nbytes
        return decoded

    def _drop_expired(self) -> None:
        """Entries are in the order they started: the expired ones are at the front."""
        oldest = self._clock() - self._ttl_s
        while self._entries:
            path, entry = next(iter(self._entries.items()))
            if entry.at > oldest:
                return
            del self._entries[path]
            entry.dropped = True
            self._held -= entry.nbytes
            if entry.future is not None:
                entry.future.cancel()  # not started yet: it never runs


def default_threads(gpus: int) -> int:
    """One without GPUs: it decodes faster than the cpu lane infers, and more would take cores
    from the lane's torch threads (whose every op waits for the slowest of them). With GPUs, half
    the cores, at most 8: the GPUs infer faster than one thread decodes."""
    if gpus == 0:
        return 1
    return max(1, min(8, (os.cpu_count() or 2) // 2))
