"""The job actors a node keeps one ahead of its jobs: a training runs in the one made before it
came, and its successor is made meanwhile."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from tests.on_ray.test_ray_weights import Rig, context, job, rig
from yolo_orch.domain import JobKind

__all__ = ["rig"]  # the fixture

pytestmark = pytest.mark.ray


async def job_actors(count: int) -> set[str]:
    """The job actors alive, once there are `count` (a killed one goes a moment later)."""
    import ray

    for _ in range(200):
        names = {n for n in ray.util.list_named_actors() if n.startswith("host:")}
        if len(names) == count:
            return names
        await asyncio.sleep(0.05)
    raise AssertionError(f"not {count} job actors: {names}")


async def test_a_training_takes_the_job_actor_its_node_made_ahead(rig: Rig, tmp_path: Path) -> None:
    lane = rig.lane_on(rig.node_ids()[0])
    for job_id in ("t1", "t2"):
        training = replace(job(job_id, model_id=None), kind=JobKind.TRAINING)
        ahead = await job_actors(1) if job_id == "t2" else set()
        await rig.executor.run(context(training, lane, tmp_path / job_id, []))
        await rig.executor.release(job_id)  # as the dispatcher does once the outcome is in
        after = await job_actors(1)  # the next one: its own actor went with its outcome
        assert after.isdisjoint(ahead)  # t2 ran in the actor made ahead of it, now gone
