"""The job actors a node keeps started ahead of its jobs: a training runs in one made before it
came, and a successor is made meanwhile."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from tests.on_ray.test_ray_weights import Rig, context, job, rig
from yolo_orch.domain import JobKind
from yolo_orch.ray_cluster.hosts import JOB_ACTORS_AHEAD

__all__ = ["rig"]  # the fixture

pytestmark = pytest.mark.ray


async def job_actors(count: int, gone: set[str] | None = None) -> set[str]:
    """The job actors alive, once there are `count` and (with `gone`) one of `gone` is not
    among them: a killed one goes a moment later, and a new one is listed a moment after it is
    made."""
    import ray

    for _ in range(200):
        names = {n for n in ray.util.list_named_actors() if n.startswith("host:")}
        if len(names) == count and (gone is None or len(gone - names) == 1):
            return names
        await asyncio.sleep(0.05)
    raise AssertionError(f"not {count} job actors, one of {gone} gone: {names}")


async def settled_job_actors(count: int) -> set[str]:
    """The job actors alive once `count` of them have stayed the same for a moment (the last
    job's own actor gone, every one made ahead listed)."""
    names = await job_actors(count)
    for _ in range(50):
        await asyncio.sleep(0.3)
        again = await job_actors(count)
        if again == names:
            return names
        names = again
    raise AssertionError(f"the job actors never settled: {names}")


async def test_a_training_takes_the_job_actor_its_node_made_ahead(rig: Rig, tmp_path: Path) -> None:
    lane = rig.lane_on(rig.node_ids()[0])
    for job_id in ("t1", "t2"):
        training = replace(job(job_id, model_id=None), kind=JobKind.TRAINING)
        ahead = await settled_job_actors(JOB_ACTORS_AHEAD) if job_id == "t2" else set()
        await rig.executor.run(context(training, lane, tmp_path / job_id, []))
        await rig.executor.release(job_id)  # as the dispatcher does once the outcome is in
        # t2 ran in an actor made ahead of it, which went with its outcome (or times out)
        await job_actors(JOB_ACTORS_AHEAD, gone=ahead or None)
