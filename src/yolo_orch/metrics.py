"""Prometheus metrics, one registry per app (no process-wide state)."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from yolo_orch.admission import Lanes
from yolo_orch.domain import Job, JobState, Outcome
from yolo_orch.runners.base import Runtime
from yolo_orch.store.base import JobStore

_DURATION_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600)


class Metrics:
    def __init__(self, store: JobStore, lanes: Lanes, runtime: Runtime) -> None:
        self._store = store
        self._lanes = lanes
        self.registry = CollectorRegistry(auto_describe=True)
        self._jobs = Gauge(
            "yolo_orch_jobs", "Jobs by state and kind.", ["state", "kind"], registry=self.registry
        )
        self._queue_depth = Gauge(
            "yolo_orch_queue_depth", "Jobs waiting for lanes.", registry=self.registry
        )
        self._duration = Histogram(
            "yolo_orch_job_duration_seconds",
            "Run time of jobs, from start to end of their last attempt.",
            ["kind", "state"],
            buckets=_DURATION_BUCKETS,
            registry=self.registry,
        )
        self._lane_busy = Gauge(
            "yolo_orch_lane_busy", "Turns taken on each lane.", ["lane"], registry=self.registry
        )
        self._lane_slots = Gauge(
            "yolo_orch_lane_slots", "Turns each lane has.", ["lane"], registry=self.registry
        )
        self.rejected = Counter(
            "yolo_orch_rejected_submissions",
            "Submissions refused with 429 because the queue was full.",
            registry=self.registry,
        )
        self.registry.register(_ModelCache(runtime))

    def job_finished(self, job: Job, outcome: Outcome, seconds: float) -> None:
        self._duration.labels(kind=job.kind, state=outcome.state).observe(seconds)

    async def render(self) -> bytes:
        """Read what lives in the store and the lanes, then print every metric."""
        counts = await self._store.counts()
        self._jobs.clear()
        for (state, kind), count in counts.items():
            self._jobs.labels(state=state, kind=kind).set(count)
        self._queue_depth.set(
            sum(count for (state, _), count in counts.items() if state == JobState.QUEUED)
        )
        for lane in self._lanes:
            self._lane_busy.labels(lane=lane.id).set(lane.busy)
            self._lane_slots.labels(lane=lane.id).set(lane.slots)
        return generate_latest(self.registry)


class _ModelCache(Collector):
    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    def collect(self) -> Iterable[Metric]:
        hits, misses = self._runtime.cache_stats()
        yield CounterMetricFamily(
            "yolo_orch_model_cache_hits", "Jobs whose model was loaded on their lane.", hits
        )
        yield CounterMetricFamily(
            "yolo_orch_model_cache_misses", "Model loads (a job found no idle instance).", misses
        )
