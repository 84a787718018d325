"""The last minutes of GPU readings, for the dashboard's gauges and sparklines.

A bounded ring buffer per lane, in memory only: a restart forgets it, and nothing is written to
the database. One task samples every lane with a GPU each `interval_s`; a lane whose reading
failed gets no sample that time. Without NVML or a GPU the history stays empty.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import anyio.to_thread

from yolo_orch.dispatch.lanes import Lanes
from yolo_orch.ops.telemetry import GpuReading, GpuTelemetry

Sampler = Callable[[], Mapping[str, GpuReading | None]]
"""Blocking: a reading per lane id (None where it failed)."""


@dataclass(frozen=True, slots=True)
class Sample:
    at: float
    """Unix time, seconds."""
    reading: GpuReading


class TelemetryHistory:
    def __init__(self, sampler: Sampler | None, *, interval_s: float, samples: int) -> None:
        """`sampler` None: nothing to sample (no NVML, or no lane has a GPU)."""
        self._sampler = sampler
        self.interval_s = interval_s
        self._samples = samples
        self._lanes: dict[str, deque[Sample]] = {}

    @property
    def enabled(self) -> bool:
        return self._sampler is not None

    def record(self, readings: Mapping[str, GpuReading | None], at: float) -> None:
        for lane, reading in readings.items():
            if reading is not None:
                ring = self._lanes.setdefault(lane, deque(maxlen=self._samples))
                ring.append(Sample(at, reading))

    def history(self) -> dict[str, list[Sample]]:
        """Oldest first, per lane."""
        return {lane: list(ring) for lane, ring in self._lanes.items()}

    async def sample_once(self) -> None:
        if self._sampler is None:
            return
        readings = await anyio.to_thread.run_sync(self._sampler)  # NVML may block
        self.record(readings, time.time())

    async def run(self) -> None:
        """Sample for ever (until cancelled)."""
        while self._sampler is not None:
            await self.sample_once()
            await asyncio.sleep(self.interval_s)


def gpu_sampler(lanes: Lanes, telemetry: GpuTelemetry | None) -> Sampler | None:
    """Reads every lane that has a GPU; None when there is nothing to read."""
    gpus = {lane.id: lane.gpu_index for lane in lanes if lane.gpu_index is not None}
    if telemetry is None or not gpus:
        return None

    def sample() -> dict[str, GpuReading | None]:
        return {lane: telemetry.read(index) for lane, index in gpus.items()}

    return sample
