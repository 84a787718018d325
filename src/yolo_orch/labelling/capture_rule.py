"""Which images a job captures (`CaptureRule`, from `params.capture.CaptureWhen`) and how many it
may (`CaptureCaps`: the job's `max_total` and its sliding hour's `max_per_hour`).

Pure: an image's result entry (the dict its job's result holds, `domain.results`) and its number
in, a yes or no out; the caps read the clock they are given."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from yolo_orch.params.capture import CaptureWhen

HOUR_S = 3600.0


def predictions(task: str, entry: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    """What the rule looks at: the entry's detections; classify: its top class alone (streams
    list the classes as `detections`, inference jobs as `classes`, best first)."""
    listed: Sequence[Mapping[str, Any]] = entry.get("detections") or entry.get("classes") or []
    return listed[:1] if task == "classify" else listed


class CaptureRule:
    def __init__(self, when: CaptureWhen, task: str) -> None:
        self._when = when
        self._task = task
        self._classes = frozenset(when.classes or ())
        self._tests_detections = (
            bool(self._classes) or when.conf_below is not None or when.conf_above is not None
        )

    def selects(self, entry: Mapping[str, Any], number: int) -> bool:
        """Whether the image is captured: `number` is its place among the job's images (a
        stream's: among its source's frames), from 1."""
        when = self._when
        if when.every_n is not None and (number - 1) % when.every_n == 0:
            return True
        found = predictions(self._task, entry)
        if when.no_detections and not found:
            return True
        return self._tests_detections and any(self._unsure(item) for item in found)

    def _unsure(self, item: Mapping[str, Any]) -> bool:
        when = self._when
        if self._classes and item.get("class_id") not in self._classes:
            return False
        confidence = float(item.get("confidence", 0.0))
        if when.conf_below is not None and confidence >= when.conf_below:
            return False
        return when.conf_above is None or confidence >= when.conf_above


class CaptureCaps:
    """A job's caps: `allows()` before an image is queued, `took()` once it is."""

    def __init__(
        self, max_total: int, max_per_hour: int | None, clock: Callable[[], float]
    ) -> None:
        """`clock`: monotonic seconds."""
        self._max_total = max_total
        self._max_per_hour = max_per_hour
        self._clock = clock
        self.taken = 0
        self._last_hour: deque[float] = deque()
        """When each image of the sliding hour was taken, oldest first (per-hour cap only)."""

    def allows(self) -> bool:
        if self.taken >= self._max_total:
            return False
        if self._max_per_hour is None:
            return True
        hour_ago = self._clock() - HOUR_S
        while self._last_hour and self._last_hour[0] <= hour_ago:
            self._last_hour.popleft()
        return len(self._last_hour) < self._max_per_hour

    def took(self) -> None:
        self.taken += 1
        if self._max_per_hour is not None:
            self._last_hour.append(self._clock())
