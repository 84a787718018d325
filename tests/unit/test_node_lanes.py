"""Lanes of several nodes (`<node>/cuda:<i>`): a job takes its lanes on one node, and the lanes
follow the cluster's nodes as they come and go. No Ray needed."""

from __future__ import annotations

from typing import Any

from yolo_orch.dispatch.lanes import Lanes
from yolo_orch.ray_cluster.nodes import ClusterWatcher


def node(node_id: str, gpus: int, alive: bool = True) -> dict[str, Any]:
    return {
        "NodeID": node_id,
        "Alive": alive,
        "NodeManagerAddress": "10.0.0.1",
        "Resources": {"GPU": gpus},
    }


async def test_a_multi_lane_job_takes_its_lanes_on_one_node() -> None:
    lanes = Lanes(["a/cuda:0", "a/cuda:1", "b/cuda:0", "b/cuda:1"], 1)
    assert lanes.largest_node == 2
    assert await lanes.try_admit("one", 1) is not None  # a/cuda:0
    two = await lanes.try_admit("two", 2)
    assert two is not None
    assert [lane.id for lane in two] == ["b/cuda:0", "b/cuda:1"]
    # one lane free on a, none on b: a 2-lane job waits, though... nothing else is free
    assert await lanes.try_admit("three", 2) is None
    assert lanes.lanes_to_hold(2, reserved=set()) in (
        {"a/cuda:0", "a/cuda:1"},
        {"b/cuda:0", "b/cuda:1"},
    )
    assert lanes.free_slots == 1


async def test_a_waiting_multi_lane_job_holds_the_node_whose_busy_lane_was_taken_first() -> None:
    lanes = Lanes(["a/cuda:0", "a/cuda:1", "b/cuda:0", "b/cuda:1"], 1)
    for job in ("first", "second", "third", "fourth"):
        assert await lanes.try_admit(job, 1) is not None
    # the lanes taken first and third end: each node has one lane free
    order = [lane for lane in lanes]
    lanes.release("first", [order[0]])
    lanes.release("third", [order[2]])
    busy = {lane.id: next(iter(lane.jobs)) for lane in lanes if lane.jobs}
    assert busy == {"a/cuda:1": "second", "b/cuda:1": "fourth"}
    # "second" started before "fourth": node a is the nearer to having two lanes free
    assert lanes.lanes_to_hold(2, reserved=set()) == {"a/cuda:0", "a/cuda:1"}
    lanes.release("second", [order[1]])
    assert await lanes.try_admit("fifth", 1) is not None  # takes a lane of a (lowest index)
    # now a's busy lane was taken last: b's "fourth" started before "fifth"
    assert lanes.lanes_to_hold(2, reserved=set()) == {"b/cuda:0", "b/cuda:1"}


async def test_this_hosts_lanes_are_one_node() -> None:
    lanes = Lanes(["cuda:0", "cuda:1", "cuda:2"], 1)
    assert lanes.largest_node == 3
    chosen = await lanes.try_admit("job", 3)
    assert chosen is not None
    assert len(chosen) == 3


def test_lanes_follow_the_nodes_that_join_and_leave() -> None:
    lanes = Lanes([], 1, dynamic=True)
    changes: list[int] = []
    watcher = ClusterWatcher(lanes, list, lambda: changes.append(1), cpu_lanes=True, interval_s=1.0)
    watcher.update([node("a" * 56, 2), node("b" * 56, 0), node("c" * 56, 1, alive=False)])
    assert lanes.ids == ["aaaaaaaaaaaa/cuda:0", "aaaaaaaaaaaa/cuda:1", "bbbbbbbbbbbb/cpu"]
    watcher.update([node("a" * 56, 2), node("b" * 56, 0)])
    assert len(changes) == 1  # nothing changed the second time

    watcher.update([node("b" * 56, 0), node("d" * 56, 1)])
    assert lanes.ids == ["bbbbbbbbbbbb/cpu", "dddddddddddd/cuda:0"]
    assert watcher.node_of("dddddddddddd/cuda:0") is not None
    assert watcher.node_of("aaaaaaaaaaaa/cuda:0") is None

    watcher.lose("dddddddddddd")  # a run there was lost: out at once, and while Ray says alive
    assert lanes.ids == ["bbbbbbbbbbbb/cpu"]
    watcher.update([node("b" * 56, 0), node("d" * 56, 1)])
    assert lanes.ids == ["bbbbbbbbbbbb/cpu"]


async def test_a_cluster_that_does_not_answer_keeps_its_lanes_and_reads_unreachable() -> None:
    lanes = Lanes([], 1, dynamic=True)
    answers: list[list[dict[str, Any]] | None] = [[node("a" * 56, 1)], None, [node("a" * 56, 1)]]

    def read_nodes() -> list[dict[str, Any]]:
        answer = answers.pop(0)
        if answer is None:
            raise ConnectionError("the head does not answer")
        return answer

    watcher = ClusterWatcher(lanes, read_nodes, lambda: None, cpu_lanes=False, interval_s=1.0)
    await watcher.refresh()
    assert (watcher.reachable, lanes.ids) == (True, ["aaaaaaaaaaaa/cuda:0"])
    await watcher.refresh()
    assert (watcher.reachable, lanes.ids) == (False, ["aaaaaaaaaaaa/cuda:0"])
    await watcher.refresh()
    assert watcher.reachable


async def test_a_full_lane_of_several_slots_ranks_by_its_oldest_job() -> None:
    """It frees a turn when its oldest job ends, whenever its latest one started."""
    lanes = Lanes(["cuda:0", "cuda:1"], 2)
    zero, one = list(lanes)
    for job in ("j1", "j2", "j3", "j4"):  # alternately on cuda:0 and cuda:1
        assert await lanes.try_admit(job, 1) is not None
    lanes.release("j2", [one])
    assert await lanes.try_admit("j5", 1) == (one,)
    lanes.release("j3", [zero])
    assert await lanes.try_admit("j6", 1) == (zero,)
    assert (zero.jobs, one.jobs) == ({"j1", "j6"}, {"j4", "j5"})
    assert lanes.lanes_to_hold(1, reserved=set()) == {"cuda:0"}  # j1 is the oldest
