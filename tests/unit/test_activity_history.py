"""The in-memory history of what the server did (`ops/activity.py`): fixed rings, the started
and ended counts, quantiles, and minutes made from their seconds."""

from __future__ import annotations

from types import SimpleNamespace

from yolo_orch.api.activity_history import ActivitySampler
from yolo_orch.dispatch.executor import NodeInfo
from yolo_orch.dispatch.lanes import Lanes
from yolo_orch.ops.activity import ActivityHistory, Point, Ring, Tick, quantile
from yolo_orch.ops.telemetry import GpuReading, NodeReading
from yolo_orch.store.memory import InMemoryJobStore

HOST = {"cpu_percent": 10.0, "memory_percent": 50.0, "disk_percent": None, "load_1m": 0.5}


def tick(at: float, running: int = 0, queued: int = 0, busy: int = 0, refused: int = 0) -> Tick:
    return Tick(at, running, queued, refused, busy, 4, HOST)


def test_a_ring_keeps_the_last_points_oldest_first_and_never_grows() -> None:
    ring = Ring(3)
    assert ring.points() == []
    for at in range(7):
        ring.add(Point(at=float(at)))
        assert len(ring) == min(at + 1, 3)
    assert [p.at for p in ring.points()] == [4.0, 5.0, 6.0]
    assert len(ring._slots) == 3


def test_started_and_ended_come_from_the_running_count_and_the_runs_reported() -> None:
    history = ActivityHistory()
    history.record(tick(0, running=1))
    history.record(tick(1, running=3))  # two started
    history.job_ended("inference", 0.5)
    history.job_ended("inference", 1.5)
    history.job_ended("training", 30.0)
    history.record(tick(2, running=2))  # three ended: two started besides
    history.record(tick(3, running=2))
    points = history.points("1s")
    assert [(p.started, p.finished) for p in points] == [(0, 0), (2, 0), (2, 3), (0, 0)]
    latency = points[2].as_dict()["latency_s"]
    assert latency == {
        "inference": {"p50": 0.5, "p99": 1.5, "n": 2},
        "training": {"p50": 30.0, "p99": 30.0, "n": 1},
    }
    assert points[3].as_dict()["latency_s"] == {}


def test_a_minute_is_made_from_its_seconds_when_it_ends() -> None:
    history = ActivityHistory(seconds=900, minutes=3)
    for second in range(120, 180):
        history.record(tick(second, running=second % 2, queued=second - 120, busy=second % 5))
        if second == 150:
            history.job_ended("export", 2.0)
    assert len(history.minutes) == 0
    under_way = history.points("1m")
    assert len(under_way) == 1
    assert under_way[0].at == 120.0
    history.record(tick(180))
    minute = history.minutes.points()[0]
    assert minute.at == 120.0
    assert minute.queue_depth == sum(range(60)) / 60
    assert minute.queue_depth_max == 59
    assert minute.utilisation_max == 4 / 4
    assert minute.durations == {"export": [2.0]}
    # 30 rises of the running count, and the run that ended within a second that rose by one
    assert (minute.started, minute.finished) == (31, 1)
    assert minute.host == {
        "cpu_percent": 10.0,
        "memory_percent": 50.0,
        "disk_percent": None,
        "load_1m": 0.5,
    }
    for second in range(181, 181 + 60 * 5):  # five minutes more: the ring keeps three
        history.record(tick(second))
    assert [p.at for p in history.minutes.points()] == [300.0, 360.0, 420.0]


def test_quantiles_are_values_that_occurred() -> None:
    assert quantile([], 0.5) is None
    assert quantile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert quantile([float(v) for v in range(1, 101)], 0.99) == 99.0
    assert quantile([5.0], 0.99) == 5.0


def test_each_nodes_readings_are_kept_and_a_minute_takes_their_means() -> None:
    history = ActivityHistory(seconds=900, minutes=3)
    for second in range(0, 60):
        nodes = {"gpu-a": {"load_1m": float(second % 2), "gpu_percent": 50.0}}
        if second < 30:  # a node that leaves half way through the minute
            nodes["gpu-b"] = {"load_1m": 1.0, "gpu_percent": None}
        history.record(Tick(second, 0, 0, 0, 0, 4, HOST, nodes))
    assert history.points("1s")[0].as_dict()["nodes"] == {
        "gpu-a": {"load_1m": 0.0, "gpu_percent": 50.0},
        "gpu-b": {"load_1m": 1.0, "gpu_percent": None},
    }
    history.record(tick(60))
    (minute,) = history.minutes.points()
    assert minute.nodes == {"gpu-a": {"load_1m": 0.5, "gpu_percent": 50.0}}
    assert history.points("1s")[-1].nodes == {}  # one host again: no node


async def test_the_sampler_reads_each_nodes_last_telemetry() -> None:
    reading = NodeReading(
        gpus=(GpuReading(utilization_percent=80), GpuReading(utilization_percent=40)),
        load_1m=2.5,
        memory_used_bytes=1,
        memory_total_bytes=4,
        read_at=0.0,
    )
    nodes = [NodeInfo("gpu-a", "10.0.0.2", [], reading), NodeInfo("gpu-b", "10.0.0.3", [])]
    activity = ActivityHistory()
    sampler = ActivitySampler(
        InMemoryJobStore(),
        Lanes(["sim:0"], 1),
        SimpleNamespace(refused_total=0, activity=activity),  # type: ignore[arg-type]
        SimpleNamespace(read=lambda: HOST),  # type: ignore[arg-type]
        nodes=lambda: nodes,
    )
    await sampler.sample_once()
    assert activity.points("1s")[0].nodes == {
        "gpu-a": {"load_1m": 2.5, "memory_percent": 25.0, "gpu_percent": 60.0},
        "gpu-b": {"load_1m": None, "memory_percent": None, "gpu_percent": None},
    }
