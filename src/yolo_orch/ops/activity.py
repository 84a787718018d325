"""What the server did over time, in memory: one point a second for the last 15 minutes and one a
minute for the last 24 hours, each in a ring of fixed size (a restart forgets them; nothing is
written to the database). Recording a tick is O(1) whatever the history holds; a minute's point is
made from its seconds' as the minute ends.

Plain arithmetic on numbers: the server's sampler (`api/activity_history.py`) reads the store,
the lanes and the host, and hands each tick here."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from statistics import fmean

SECOND_POINTS = 15 * 60
MINUTE_POINTS = 24 * 60
MAX_DURATIONS = 1000
"""Run times kept per kind in one point for its quantiles: past that, the rest of that second's
(or minute's) are not counted in them (a thousand jobs of one kind ending in one second)."""


@dataclass(frozen=True, slots=True)
class Tick:
    """One second's readings, as the sampler takes them."""

    at: float
    """Unix time, seconds."""
    running: int
    """Jobs running now: with the runs that ended since the last tick, says how many started."""
    queue_depth: int
    refused: int
    """Submissions refused with 429 (queue full) in this second."""
    lanes_busy: int
    lanes_slots: int
    host: Mapping[str, float | None]
    """`cpu_percent`, `memory_percent`, `disk_percent`, `load_1m` (None: not readable)."""
    nodes: Mapping[str, Mapping[str, float | None]] = field(default_factory=dict)
    """On a Ray cluster, each node's last readings by its name: `load_1m`, `memory_percent`,
    `gpu_percent` (the mean utilisation of its GPUs)."""


@dataclass(slots=True)
class Point:
    """A second's or a minute's figures. Counts are totals over it; gauges its mean (queue depth
    and utilisation also its maximum: a minute's mean hides a burst)."""

    at: float
    started: int = 0
    finished: int = 0
    refused: int = 0
    queue_depth: float = 0.0
    queue_depth_max: int = 0
    utilisation: float | None = None
    utilisation_max: float | None = None
    host: dict[str, float | None] = field(default_factory=dict)
    nodes: dict[str, dict[str, float | None]] = field(default_factory=dict)
    durations: dict[str, list[float]] = field(default_factory=dict)
    """Run times, in seconds, of the jobs that ended in it, by kind (at most `MAX_DURATIONS`)."""

    def as_dict(self) -> dict[str, object]:
        return {
            "at": self.at,
            "started": self.started,
            "finished": self.finished,
            "refused": self.refused,
            "queue_depth": self.queue_depth,
            "queue_depth_max": self.queue_depth_max,
            "utilisation": self.utilisation,
            "utilisation_max": self.utilisation_max,
            "host": dict(self.host),
            "nodes": {name: dict(readings) for name, readings in self.nodes.items()},
            "latency_s": {
                kind: {"p50": quantile(runs, 0.5), "p99": quantile(runs, 0.99), "n": len(runs)}
                for kind, runs in sorted(self.durations.items())
            },
        }


def quantile(values: list[float], q: float) -> float | None:
    """The nearest-rank quantile (a value that occurred); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


class Ring:
    """The last `size` points, oldest first when read; a slot is overwritten when the ring is
    full, so adding costs the same however long the server has run."""

    def __init__(self, size: int) -> None:
        self._slots: list[Point | None] = [None] * size
        self._next = 0
        self._count = 0

    def add(self, point: Point) -> None:
        self._slots[self._next] = point
        self._next = (self._next + 1) % len(self._slots)
        self._count = min(self._count + 1, len(self._slots))

    def points(self) -> list[Point]:
        size = len(self._slots)
        start = (self._next - self._count) % size
        return [p for i in range(self._count) if (p := self._slots[(start + i) % size])]

    def __len__(self) -> int:
        return self._count


class ActivityHistory:
    def __init__(self, seconds: int = SECOND_POINTS, minutes: int = MINUTE_POINTS) -> None:
        self.seconds = Ring(seconds)
        self.minutes = Ring(minutes)
        self._minute: list[Point] = []
        """The seconds of the minute under way, made into one point when it ends."""
        self._ended: dict[str, list[float]] = {}
        """Run times reported since the last tick, by kind."""
        self._ended_count = 0
        self._running: int | None = None

    def job_ended(self, kind: str, seconds: float) -> None:
        self._ended_count += 1
        runs = self._ended.setdefault(kind, [])
        if len(runs) < MAX_DURATIONS:
            runs.append(seconds)

    def record(self, tick: Tick) -> None:
        finished = self._ended_count
        # Each run that ended left the running count; what it grew by besides started. (A run
        # put back in the queue to retry counts as neither.)
        before = tick.running if self._running is None else self._running
        point = Point(
            at=tick.at,
            started=max(0, tick.running - before + finished),
            finished=finished,
            refused=tick.refused,
            queue_depth=tick.queue_depth,
            queue_depth_max=tick.queue_depth,
            utilisation=tick.lanes_busy / tick.lanes_slots if tick.lanes_slots else None,
            host=dict(tick.host),
            nodes={name: dict(readings) for name, readings in tick.nodes.items()},
            durations=self._ended,
        )
        point.utilisation_max = point.utilisation
        self._ended = {}
        self._ended_count = 0
        self._running = tick.running
        self.seconds.add(point)
        if self._minute and _minute_of(self._minute[0].at) != _minute_of(tick.at):
            self.minutes.add(merged(self._minute))
            self._minute = []
        self._minute.append(point)  # at most 60 (one a second), then merged

    def points(self, resolution: str) -> list[Point]:
        """`1s` or `1m`, oldest first; `1m` ends with the minute under way, so far."""
        if resolution == "1s":
            return self.seconds.points()
        return self.minutes.points() + ([merged(self._minute)] if self._minute else [])


def _minute_of(at: float) -> int:
    return int(at // 60)


def merged(points: list[Point]) -> Point:
    """One point for several (a minute's seconds), stamped at the start of their minute."""
    durations: dict[str, list[float]] = {}
    for point in points:
        for kind, runs in point.durations.items():
            kept = durations.setdefault(kind, [])
            kept.extend(runs[: MAX_DURATIONS - len(kept)])
    utilisations = [p.utilisation for p in points if p.utilisation is not None]
    return Point(
        at=_minute_of(points[0].at) * 60.0,
        started=sum(p.started for p in points),
        finished=sum(p.finished for p in points),
        refused=sum(p.refused for p in points),
        queue_depth=fmean(p.queue_depth for p in points),
        queue_depth_max=max(p.queue_depth_max for p in points),
        utilisation=fmean(utilisations) if utilisations else None,
        utilisation_max=max(utilisations) if utilisations else None,
        host={name: _mean(p.host.get(name) for p in points) for name in points[-1].host},
        # The nodes of the last second (one that left is gone), each reading its mean over the
        # seconds that had it.
        nodes={
            node: {
                name: _mean(p.nodes.get(node, {}).get(name) for p in points) for name in readings
            }
            for node, readings in points[-1].nodes.items()
        },
        durations=durations,
    )


def _mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return fmean(known) if known else None
