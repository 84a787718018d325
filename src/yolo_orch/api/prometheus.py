"""Prometheus metrics, one registry per app (no process-wide state)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import anyio.to_thread
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from yolo_orch.dispatch.batching import LaneBatches
from yolo_orch.dispatch.lanes import Lane, Lanes
from yolo_orch.domain import Job, JobFilter, JobKind, JobState, JsonObject, Outcome
from yolo_orch.ops.activity import ActivityHistory
from yolo_orch.ops.telemetry import GpuTelemetry
from yolo_orch.runners.base import Runtime
from yolo_orch.store.base import JobStore

_GPU_GAUGES = (
    ("memory_used_bytes", "memory_used_bytes", "GPU memory in use (NVML)."),
    ("memory_total_bytes", "memory_total_bytes", "GPU memory in all (NVML)."),
    ("utilization_percent", "utilization_percent", "GPU busy time over the last sample (NVML)."),
    ("temperature_c", "temperature_celsius", "GPU temperature (NVML)."),
    ("power_w", "power_watts", "GPU power draw (NVML)."),
)
_BATCH_JOBS_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 1024)
_BATCH_WAIT_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1, 10)
_STREAMS_PAGE = 500
"""Running stream jobs read from the store at a time."""
_DURATION_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600)


class ConnectionCounts(Protocol):
    """What the server's cap on client connections counts (`api.connections.ConnectionBook`)."""

    limit: int
    shed_total: int
    refused_total: int

    @property
    def open_count(self) -> int: ...


class Metrics:
    def __init__(
        self, store: JobStore, lanes: Lanes, runtime: Runtime, telemetry: GpuTelemetry | None
    ) -> None:
        self._store = store
        self._lanes = lanes
        self._telemetry = telemetry
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
        self._lane_healthy = Gauge(
            "yolo_orch_lane_healthy",
            "1 unless its GPU reports a fatal state.",
            ["lane"],
            registry=self.registry,
        )
        self._gpu = {
            field: Gauge(f"yolo_orch_gpu_{name}", help_text, ["lane"], registry=self.registry)
            for field, name, help_text in _GPU_GAUGES
        }
        self.rejected = Counter(
            "yolo_orch_rejected_submissions",
            "Submissions refused with 429 because the queue was full.",
            registry=self.registry,
        )
        self._removed_jobs = Counter(
            "yolo_orch_removed_jobs",
            "Finished jobs forgotten: deleted on request, or expired by retention.",
            ["reason"],
            registry=self.registry,
        )
        self._removed_bytes = Counter(
            "yolo_orch_removed_bytes",
            "Bytes of files removed: of deleted or expired jobs, orphaned upload folders, "
            "stale temporary files.",
            ["reason"],
            registry=self.registry,
        )
        self._batch_jobs = Histogram(
            "yolo_orch_batch_jobs",
            "Jobs sharing each run of a lane that batches (1: a job that ran alone).",
            ["lane"],
            buckets=_BATCH_JOBS_BUCKETS,
            registry=self.registry,
        )
        self._batch_wait = Histogram(
            "yolo_orch_batch_wait_seconds",
            "Time each batch held its lane's turn waiting for companions (batch_window_ms).",
            ["lane"],
            buckets=_BATCH_WAIT_BUCKETS,
            registry=self.registry,
        )
        self._batches: dict[str, LaneBatches] = {}
        self.activity = ActivityHistory()
        """The same figures over time, for GET /v1/history (`api/activity_history.py`)."""
        self.registry.register(_ModelCache(runtime))
        self._streams = _Streams()
        self.registry.register(self._streams)

    def count_connections(self, connections: ConnectionCounts) -> None:
        self.registry.register(_Connections(connections))

    def batch_ran(self, lane: str, jobs: int, wait_s: float) -> None:
        self._batch_jobs.labels(lane=lane).observe(jobs)
        self._batch_wait.labels(lane=lane).observe(wait_s)
        self._batches.setdefault(lane, LaneBatches()).add(jobs, wait_s)

    def batches(self, lane: str) -> LaneBatches:
        """The lane's batches since start (none on a lane that does not batch)."""
        return self._batches.get(lane, LaneBatches())

    def removed(self, reason: str, jobs: int, freed_bytes: int) -> None:
        if jobs:
            self._removed_jobs.labels(reason=reason).inc(jobs)
        self._removed_bytes.labels(reason=reason).inc(freed_bytes)

    def job_finished(self, job: Job, outcome: Outcome, seconds: float) -> None:
        self._duration.labels(kind=job.kind, state=outcome.state).observe(seconds)
        self.activity.job_ended(job.kind, seconds)

    @property
    def refused_total(self) -> int:
        """Submissions refused with 429 since start."""
        return int(self.registry.get_sample_value("yolo_orch_rejected_submissions_total") or 0)

    async def render(self) -> bytes:
        """Read what lives in the store and the lanes, then print every metric."""
        counts = await self._store.counts()
        self._jobs.clear()
        for (state, kind), count in counts.items():
            self._jobs.labels(state=state, kind=kind).set(count)
        self._queue_depth.set(
            sum(count for (state, _), count in counts.items() if state == JobState.QUEUED)
        )
        for gauge in self._gpu.values():
            gauge.clear()
        for lane in self._lanes:
            self._lane_busy.labels(lane=lane.id).set(lane.busy)
            self._lane_slots.labels(lane=lane.id).set(lane.slots)
            self._lane_healthy.labels(lane=lane.id).set(int(lane.healthy))
            await self._read_gpu(lane)
        self._streams.details = await self._running_streams()
        return generate_latest(self.registry)

    async def _running_streams(self) -> list[tuple[str, JsonObject]]:
        """Each running stream job's id and progress detail (none before its first report)."""
        running = JobFilter(states=(JobState.RUNNING,), kinds=(JobKind.STREAM,))
        details: list[tuple[str, JsonObject]] = []
        before: int | None = None
        while True:
            page = await self._store.list_jobs(running, limit=_STREAMS_PAGE, before_seq=before)
            for job in page.jobs:
                if job.progress is not None and job.progress.detail is not None:
                    details.append((job.id, job.progress.detail))
            if page.next_cursor is None:
                return details
            before = page.next_cursor

    async def _read_gpu(self, lane: Lane) -> None:
        if self._telemetry is None or lane.gpu_index is None:
            return
        reading = await anyio.to_thread.run_sync(self._telemetry.read, lane.gpu_index)
        for field, gauge in self._gpu.items():
            value = getattr(reading, field, None) if reading else None
            if value is not None:  # a reading NVML could not take is left out, not zero
                gauge.labels(lane=lane.id).set(value)


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
        yield CounterMetricFamily(
            "yolo_orch_images_decoded_ahead",
            "Uploaded images whose job found them decoded while it waited (decode_ahead_mb).",
            self._runtime.decoded_ahead(),
        )


class _Connections(Collector):
    def __init__(self, connections: ConnectionCounts) -> None:
        self._connections = connections

    def collect(self) -> Iterable[Metric]:
        book = self._connections
        yield GaugeMetricFamily(
            "yolo_orch_connections", "Client connections open now.", book.open_count
        )
        yield GaugeMetricFamily(
            "yolo_orch_connections_limit",
            "Client connections allowed (max_connections).",
            book.limit,
        )
        yield CounterMetricFamily(
            "yolo_orch_connections_shed",
            "Connections closed at the cap to make room: idle, silent, stalled, or held waits "
            "and streams answered early.",
            book.shed_total,
        )
        yield CounterMetricFamily(
            "yolo_orch_connections_refused",
            "Connections answered 503 too_many_connections: none could make room.",
            book.refused_total,
        )


class _Streams(Collector):
    """Gauges of running streams, from their jobs' progress details as `render` last read them:
    label values are job ids, sources as shown (credentials redacted), the job's own zone and
    line names and its model's class names."""

    def __init__(self) -> None:
        self.details: list[tuple[str, JsonObject]] = []

    def collect(self) -> Iterable[Metric]:
        fps_in = GaugeMetricFamily(
            "yolo_orch_stream_fps_in",
            "Frames taken per second lately, all sources.",
            labels=["job"],
        )
        fps_out = GaugeMetricFamily(
            "yolo_orch_stream_fps_out",
            "Frames processed per second lately, all sources.",
            labels=["job"],
        )
        latency = GaugeMetricFamily(
            "yolo_orch_stream_latency_ms",
            "From a frame's capture to its result, lately.",
            labels=["job", "quantile"],
        )
        dropped = GaugeMetricFamily(
            "yolo_orch_stream_frames_dropped",
            "Frames taken that a newer one replaced before its lane reached them, since the "
            "run began.",
            labels=["job"],
        )
        counts = GaugeMetricFamily(
            "yolo_orch_stream_count",
            "Zone (`inside` now; `in`, `out`) and line (`in`, `out`) counts by class, since the "
            "run began.",
            labels=["job", "source", "kind", "name", "direction", "class"],
        )
        for job_id, detail in self.details:
            _add(fps_in, [job_id], detail.get("fps_in"))
            _add(fps_out, [job_id], detail.get("fps_out"))
            quantiles = detail.get("latency_ms")
            if isinstance(quantiles, dict):
                _add(latency, [job_id, "0.5"], quantiles.get("p50"))
                _add(latency, [job_id, "0.99"], quantiles.get("p99"))
            drops = [source.get("frames_dropped") for source in _items(detail.get("sources"))]
            _add(dropped, [job_id], sum(drop for drop in drops if isinstance(drop, int)))
            for source, kind, name, direction, cls, value in _count_rows(detail.get("counts")):
                _add(counts, [job_id, source, kind, name, direction, cls], value)
        return [fps_in, fps_out, latency, dropped, counts]


def _add(family: GaugeMetricFamily, labels: list[str], value: object) -> None:
    """A number the runner reported; anything else (none yet) is left out, not zero."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        family.add_metric(labels, value)


_COUNT_KINDS = (("zones", "zone"), ("lines", "line"))


def _count_rows(counts: object) -> Iterable[tuple[str, str, str, str, str, object]]:
    """(source, kind, name, direction, class, value) of each source's zone and line counts:
    `[{"source", "zones": {name: {direction: {class: n}}}, "lines": ...}]`. Whatever is not of
    that shape is skipped: a detail is the runner's, read back from the store."""
    for entry in _items(counts):
        source = str(entry.get("source", ""))
        for key, kind in _COUNT_KINDS:
            for name, directions in _mapping(entry.get(key)).items():
                for direction, by_class in _mapping(directions).items():
                    for cls, value in _mapping(by_class).items():
                        yield source, kind, str(name), str(direction), str(cls), value


def _items(value: object) -> list[JsonObject]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _mapping(value: object) -> JsonObject:
    return value if isinstance(value, dict) else {}
