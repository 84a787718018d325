"""A job host on a Ray node with weights to ship, for the Ray tests of weights and job hosts."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from yolo_orch.dispatch.lanes import Lanes
from yolo_orch.domain import Job, JobKind, JobState, Progress
from yolo_orch.files.start_journal import StartJournal
from yolo_orch.runners.base import RunContext


@dataclass
class Rig:
    executor: Any
    watcher: Any
    weights: Path
    sha256: str
    cache: Path
    starts: StartJournal

    def node_ids(self) -> list[str]:
        return [node.node_id for node in self.watcher.nodes.values() if node.gpus]

    def lane_on(self, node_id: str) -> str:
        return f"{node_id[:12]}/cuda:0"


@pytest.fixture
def rig(cluster: Any, tmp_path: Path) -> Iterator[Rig]:
    import ray

    from yolo_orch.ray_cluster.executor import RayExecutor
    from yolo_orch.ray_cluster.node_runtime import NodeRuntimeSpec
    from yolo_orch.ray_cluster.nodes import ClusterWatcher
    from yolo_orch.ray_cluster.parcels import InputRules, ServerWeights, TaskBuilder

    ray.init(
        address=cluster.address,
        namespace=f"test-{tmp_path.name}",
        configure_logging=False,
        log_to_driver=False,
    )
    weights = tmp_path / "model.pt"
    weights.write_bytes(b"weights " * 1000)
    sha256 = hashlib.sha256(weights.read_bytes()).hexdigest()

    async def weights_of(job: Job) -> ServerWeights | None:
        if job.model_id is None:
            return None
        return ServerWeights(job.model_id, sha256, "model.pt", "detect", weights)

    async def no_variants(model_id: str) -> list[Any]:
        return []  # the simulated runtime runs no variants

    watcher = ClusterWatcher(
        Lanes([], 1, dynamic=True), ray.nodes, lambda: None, cpu_lanes=False, interval_s=1.0
    )
    watcher.update(ray.nodes())
    build_task = TaskBuilder(
        weights_of,
        NodeRuntimeSpec("simulated", 1, None, 1_000_000, ()),
        InputRules((), max_files=10, max_image_pixels=1_000_000, max_bytes=1 << 20),
        variants_of=no_variants,
        cache_dir=tmp_path / "node-cache",
        cache_models=2,
        put=ray.put,
    )
    starts = StartJournal(tmp_path / "started.jsonl")
    executor = RayExecutor(watcher, build_task, slots_per_lane=1, cancel_grace_s=1.0, starts=starts)
    try:
        yield Rig(executor, watcher, weights, sha256, tmp_path / "node-cache", starts)
    finally:
        for name in ray.util.list_named_actors():  # the lane actors the runs made
            ray.kill(ray.get_actor(name))
        ray.shutdown()
        starts.close()


def job(job_id: str, model_id: str | None = "m1", steps: int = 5) -> Job:
    now = datetime.now(UTC)
    return Job(
        id=job_id,
        seq=1,
        kind=JobKind.INFERENCE,
        state=JobState.RUNNING,
        model="model.pt",
        model_id=model_id,
        spec={"inputs": ["a.jpg"], "params": {"sim_seconds": 0.05, "sim_steps": steps}},
        priority=0,
        gpus=1,
        devices=(),
        attempt=1,
        max_attempts=3,
        created_at=now,
    )


def context(the_job: Job, lane: str, workdir: Path, seen: list[Progress]) -> RunContext:
    return RunContext(
        job=the_job,
        devices=(lane,),
        workdir=workdir,
        report_progress=seen.append,
        should_cancel=lambda: False,
    )
