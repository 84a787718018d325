"""Loaded models kept warm per lane, an instance never used by two runs at once.

A run (a job, or a batch of jobs that share forward passes and their params) checks an instance
out of its lane's cache for the whole run (a busy model makes a second run load its own instance)
and gives it back at the end: ultralytics' `predict` updates predictor arguments outside its
lock, so a shared instance would mix up two runs' `conf`/`imgsz`.
Instances are keyed by fingerprint: a `.pt`'s sha256, or an exported variant's manifest digest,
so every format stays warm the same way.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from yolo_orch.errors import InvalidJob, InvalidJobInput, JobCancelled

if TYPE_CHECKING:
    from ultralytics.models import YOLO

__all__ = ["ModelCache"]

Load = Callable[[], "YOLO"]


@dataclass
class _Lane:
    lock: threading.Lock = field(default_factory=threading.Lock)
    idle: OrderedDict[str, YOLO] = field(default_factory=OrderedDict)
    """Loaded instances nobody is using, least recently used first."""
    busy: Counter[str] = field(default_factory=Counter)
    """Checked-out instances per sha256."""
    generation: int = 0
    """Bumped when the lane is flushed: instances checked out before are not taken back."""


class ModelCache:
    """Up to `size` idle instances per lane, least recently used evicted first."""

    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError("model_cache_size must be >= 0")
        self._size = size
        self._lanes: dict[str, _Lane] = {}
        self._lanes_lock = threading.Lock()
        self.loads = 0
        """How many model instances were loaded since start (a cache-miss counter)."""
        self.hits = 0
        """Jobs that found their model loaded and idle on their lane."""

    def models(self, device: str) -> list[str]:
        """sha256s of the models loaded on `device`: idle ones, least recently used first, then
        the ones only in use."""
        lane = self._lane(device)
        with lane.lock:
            idle = list(lane.idle)
            return idle + [sha for sha, n in lane.busy.items() if n > 0 and sha not in lane.idle]

    @contextmanager
    def checkout(self, device: str, sha: str, load: Load) -> Iterator[YOLO]:
        """An instance of the model or variant fingerprinted `sha` on `device` for the caller
        alone: an idle one, or `load()`.
        It goes back to the lane afterwards unless the job failed in a way that may have broken
        it (a job that stopped for its own input or a cancel leaves it fine)."""
        lane = self._lane(device)
        with lane.lock:
            model = lane.idle.pop(sha, None)
            lane.busy[sha] += 1
            generation = lane.generation
        if model is not None:
            # The counters are shared by all lanes: count under `_lanes_lock`, not the lane's
            # own lock, or two lanes' increments can race.
            with self._lanes_lock:
                self.hits += 1
        keep = False
        try:
            if model is None:
                model = load()
                with self._lanes_lock:
                    self.loads += 1
            yield model
            keep = True
        except (JobCancelled, InvalidJobInput, InvalidJob):
            keep = True
            raise
        finally:
            with lane.lock:
                lane.busy[sha] -= 1
                if lane.busy[sha] <= 0:
                    del lane.busy[sha]
                if keep and model is not None and generation == lane.generation:
                    self._put_idle(lane, sha, model)

    def flush(self, device: str) -> None:
        """Drop the lane's idle instances, and the busy ones when they come back (after a CUDA
        out-of-memory error)."""
        lane = self._lane(device)
        with lane.lock:
            lane.idle.clear()
            lane.generation += 1

    def _lane(self, device: str) -> _Lane:
        with self._lanes_lock:
            return self._lanes.setdefault(device, _Lane())

    def _put_idle(self, lane: _Lane, sha: str, model: YOLO) -> None:
        if self._size == 0:
            return
        if sha in lane.idle:  # another job's instance came back first: keep one
            lane.idle.move_to_end(sha)
            return
        lane.idle[sha] = model
        while len(lane.idle) > self._size:
            lane.idle.popitem(last=False)
