"""The job actors a node keeps: a training runs in one made before it came (and a successor is
made meanwhile), or in the one kept from the last job on its lanes; one killed is not kept, and
a node keeps a few at most."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from tests.support.ray_weights import Rig, context, job, rig
from yolo_orch.domain import JobKind
from yolo_orch.errors import JobCancelled
from yolo_orch.ray_cluster.hosts import JOB_ACTORS_AHEAD, JOB_ACTORS_KEPT

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


async def holder_of(job_id: str) -> str:
    """The job actor that holds the job's run (it does until the run is released)."""
    import ray

    for _ in range(200):
        for name in ray.util.list_named_actors():
            if name.startswith("host:"):
                runs = await ray.get_actor(name).runs.remote()
                if any(held == job_id for held, _ in runs):
                    return str(name)
        await asyncio.sleep(0.05)
    raise AssertionError(f"no job actor holds {job_id}")


async def train(rig: Rig, job_id: str, lanes: tuple[str, ...], folder: Path) -> str:
    """Run a training on `lanes` and let it go, as the dispatcher does once its outcome is in;
    the job actor it ran in."""
    training = replace(job(job_id, model_id=None), kind=JobKind.TRAINING, gpus=len(lanes))
    ctx = replace(context(training, lanes[0], folder / job_id, []), devices=lanes)
    run = asyncio.create_task(rig.executor.run(ctx))
    try:
        holder = await holder_of(job_id)
        await run
    finally:
        await rig.executor.release(job_id)
    return holder


def lanes_of(rig: Rig) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """A node's lane sets: its first GPU, its second, both."""
    node = rig.node_ids()[0][:12]
    return (f"{node}/cuda:0",), (f"{node}/cuda:1",), (f"{node}/cuda:0", f"{node}/cuda:1")


async def test_a_training_takes_the_job_actor_its_node_made_ahead(rig: Rig, tmp_path: Path) -> None:
    one, other, _ = lanes_of(rig)
    first = await train(rig, "t1", one, tmp_path)
    before = await settled_job_actors(JOB_ACTORS_AHEAD + 1)  # t1's kept, and those made ahead
    second = await train(rig, "t2", other, tmp_path)
    assert second in before  # one made ahead of it, not t1's (kept for cuda:0)
    assert second != first
    # and a successor was made meanwhile; t2's is kept for cuda:1
    assert len(await settled_job_actors(JOB_ACTORS_AHEAD + 2) - before) == 1


async def test_a_job_actor_is_kept_for_the_next_job_on_its_lanes(rig: Rig, tmp_path: Path) -> None:
    one, other, both = lanes_of(rig)
    first = await train(rig, "t1", one, tmp_path)
    assert await train(rig, "t2", one, tmp_path) == first
    third = await train(rig, "t3", other, tmp_path)
    fourth = await train(rig, "t4", both, tmp_path)
    assert len({first, third, fourth}) == 3
    # kept: one for each of the three lane sets, but a node keeps two, and the oldest went
    assert JOB_ACTORS_KEPT == 2
    alive = await settled_job_actors(JOB_ACTORS_AHEAD + JOB_ACTORS_KEPT)
    assert first not in alive
    assert {third, fourth} <= alive


async def test_a_job_actor_killed_under_its_run_is_not_kept(rig: Rig, tmp_path: Path) -> None:
    one, _, _ = lanes_of(rig)
    training = replace(job("t1", model_id=None), kind=JobKind.TRAINING)
    training = replace(training, spec={"params": {"sim_seconds": 60, "sim_steps": 2}})
    cancelled = False
    ctx = replace(context(training, one[0], tmp_path / "t1", []), should_cancel=lambda: cancelled)
    run = asyncio.create_task(rig.executor.run(ctx))
    holder = await holder_of("t1")
    cancelled = True  # its first step lasts 30 s: its actor is killed after the 1 s grace
    with pytest.raises(JobCancelled):
        await run
    await rig.executor.release("t1")
    assert holder not in await settled_job_actors(JOB_ACTORS_AHEAD)
