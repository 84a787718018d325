"""A stream's running numbers: frames per second over the last few seconds, and the latency
from capture to result over the last frames, kept in bounded windows."""

from __future__ import annotations

import threading
from collections import deque

FPS_WINDOW_S = 5.0
LATENCY_WINDOW = 1000
"""Frames whose latency the percentiles are taken over, per source."""


class Rate:
    """Events per second over the last `FPS_WINDOW_S` seconds (times from one monotonic clock)."""

    def __init__(self) -> None:
        self._times: deque[float] = deque()
        self._lock = threading.Lock()
        self.count = 0

    def add(self, now: float) -> None:
        with self._lock:
            self.count += 1
            self._times.append(now)
            self._trim(now)

    def per_s(self, now: float) -> float:
        with self._lock:
            self._trim(now)
            return len(self._times) / FPS_WINDOW_S

    def _trim(self, now: float) -> None:
        while self._times and self._times[0] < now - FPS_WINDOW_S:
            self._times.popleft()


class SourceStats:
    """One source's processed frames: their rate and latencies."""

    def __init__(self) -> None:
        self._rate = Rate()
        self._latencies: deque[float] = deque(maxlen=LATENCY_WINDOW)
        self._lock = threading.Lock()

    @property
    def count(self) -> int:
        return self._rate.count

    def processed(self, now: float, latency_ms: float) -> None:
        self._rate.add(now)
        with self._lock:
            self._latencies.append(latency_ms)

    def fps(self, now: float) -> float:
        return self._rate.per_s(now)

    def latencies(self) -> list[float]:
        with self._lock:
            return list(self._latencies)


def latency_percentiles(latencies: list[float]) -> dict[str, float | None]:
    """p50 and p99 (nearest rank) in milliseconds; None before the first frame."""
    if not latencies:
        return {"p50": None, "p99": None}
    ordered = sorted(latencies)

    def rank(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)

    return {"p50": rank(0.50), "p99": rank(0.99)}
