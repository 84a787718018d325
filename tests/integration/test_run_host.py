"""`RunHost`, the body of the Ray lane and job actors, as plain Python (no Ray started): each run's
events kept whole and in order from any index, a run asked for again not started twice, its
runtime kept warm between jobs, a job actor made before its job seeing that job's GPUs (and
taking later jobs on those lanes only), and a
fatal CUDA error that does not end the actor's process before the server has the ending."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray")

from yolo_orch.domain import Job, JobKind, JobState
from yolo_orch.errors import ErrorCode
from yolo_orch.ray_cluster import actors
from yolo_orch.ray_cluster.actors import RunHost, visible_devices
from yolo_orch.ray_cluster.node_runtime import NodeRuntimeSpec
from yolo_orch.ray_cluster.node_side import (
    Event,
    Failed,
    FilesBack,
    Finished,
    NodeTask,
    Progressed,
    Stopped,
)

WAIT_S = 10.0


def task(tmp_path: Path, job_id: str, attempt: int = 1, **params: Any) -> NodeTask:
    job = Job(
        id=job_id,
        seq=1,
        kind=JobKind.INFERENCE,
        state=JobState.RUNNING,
        model="sim",
        model_id=None,
        spec={"inputs": ["a.jpg"], "params": {"sim_seconds": 0.05, "sim_steps": 3, **params}},
        priority=0,
        gpus=1,
        devices=("node/cuda:0",),
        attempt=attempt,
        max_attempts=3,
        created_at=datetime.now(UTC),
    )
    return NodeTask(
        job=job,
        lanes=("node/cuda:0",),
        runtime=NodeRuntimeSpec(
            name="simulated",
            model_cache_size=1,
            cpu_threads=None,
            max_image_pixels=1 << 24,
            shared_data_roots=(),
        ),
        seed={},
        inputs=None,
        weights=None,
        variant=None,
        cache_dir=str(tmp_path / "cache"),
        cache_models=2,
    )


def drain(host: RunHost, job_id: str, attempt: int = 1, since: int = 0) -> list[Event]:
    """Every event from `since` to the run's ending, poll after poll."""
    seen: list[Event] = []
    while not seen or not isinstance(seen[-1], Finished | Failed | Stopped):
        events = host.events(None, job_id, attempt, since + len(seen), WAIT_S)
        assert events is not None
        seen.extend(events)
    return seen


def test_events_come_whole_and_in_order_from_any_index(tmp_path: Path) -> None:
    host = RunHost("node-id")
    first = host.events(task(tmp_path, "j1"), "j1", 1, 0, WAIT_S)
    assert first
    events = first + drain(host, "j1", since=len(first))
    assert [e.progress.done for e in events if isinstance(e, Progressed)] == [1, 2, 3]
    assert isinstance(events[-2], FilesBack)
    assert events[-2].files["sim-runs.log"] == b"attempt 1 succeeded\n"
    # a server that came back asks again from 0, and from further on
    assert drain(host, "j1") == events
    assert drain(host, "j1", since=2) == events[2:]


def test_a_run_asked_for_again_does_not_start_twice(tmp_path: Path) -> None:
    host = RunHost("node-id")
    host.events(task(tmp_path, "j1"), "j1", 1, 0, 0)
    host.events(task(tmp_path, "j1"), "j1", 1, 0, 0)
    finished = [e for e in drain(host, "j1") if isinstance(e, Finished)]
    assert len(finished) == 1
    assert host.held() == 1


def test_only_the_attempt_it_holds_is_followed(tmp_path: Path) -> None:
    host = RunHost("node-id")
    assert host.events(None, "j1", 1, 0, 0) is None  # never started here
    host.events(task(tmp_path, "j1"), "j1", 1, 0, 0)
    assert host.holds("j1", 1)
    assert not host.holds("j1", 2)
    assert host.events(None, "j1", 2, 0, 0) is None


@pytest.fixture
def runtimes_made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The job ids runtimes are made for, from now on (earlier tests' runs may still start)."""
    made: list[str] = []
    real = actors.runtime_of

    def counting(node_task: NodeTask, node_id: str) -> Any:
        made.append(node_task.job.id)
        return real(node_task, node_id)

    monkeypatch.setattr(actors, "runtime_of", counting)
    return made


def test_a_cancel_that_comes_before_its_run_stops_the_run_when_it_arrives(
    tmp_path: Path, runtimes_made: list[str]
) -> None:
    """A threaded actor may run a job's cancel before the call that brings its task: the run
    then stops before it loads anything (a runtime, weights, a model)."""
    host = RunHost("node-id")
    host.cancel("early", 1)
    host.events(task(tmp_path, "early", sim_seconds=0.3, sim_steps=3), "early", 1, 0, 0)
    assert isinstance(drain(host, "early")[-1], Stopped)
    assert "early" not in runtimes_made
    host.release("early")
    host.events(task(tmp_path, "j2"), "j2", 1, 0, 0)  # another job's cancel is not its own
    assert isinstance(drain(host, "j2")[-1], Finished)


def test_a_late_cancel_of_an_attempt_stops_no_later_one(tmp_path: Path) -> None:
    host = RunHost("node-id")
    host.events(task(tmp_path, "j1"), "j1", 1, 0, 0)
    drain(host, "j1")
    host.release("j1")
    host.cancel("j1", 1)  # sent before the release, run after it
    host.events(task(tmp_path, "j1", attempt=2), "j1", 2, 0, 0)
    assert isinstance(drain(host, "j1", attempt=2)[-1], Finished)


def test_release_and_keep_only_let_runs_go(tmp_path: Path) -> None:
    host = RunHost("node-id")
    for job_id in ("a", "b", "c"):
        host.events(task(tmp_path, job_id), job_id, 1, 0, 0)
    host.release("a")
    host.keep_only(["b"])
    assert (host.holds("a", 1), host.holds("b", 1), host.holds("c", 1)) == (False, True, False)
    assert host.held() == 1


def test_the_runtime_is_kept_for_the_next_job(tmp_path: Path, runtimes_made: list[str]) -> None:
    host = RunHost("node-id")
    for job_id in ("kept-1", "kept-2"):
        host.events(task(tmp_path, job_id), job_id, 1, 0, 0)
        drain(host, job_id)
    assert [job_id for job_id in runtimes_made if job_id.startswith("kept-")] == ["kept-1"]


def test_a_fatal_cuda_error_ends_the_run_not_the_process(tmp_path: Path) -> None:
    """`serve_task` would `os._exit` after it: the actor stops before, so the server gets the
    ending (were it not so, this test's process would be gone)."""
    host = RunHost("node-id")
    host.events(task(tmp_path, "j1", sim_fail="cuda_fatal"), "j1", 1, 0, 0)
    ending = drain(host, "j1")[-1]
    assert isinstance(ending, Failed)
    assert ending.error.code == ErrorCode.CUDA_FATAL


def test_a_job_actor_made_ahead_sees_its_jobs_gpus_and_says_which_runs_it_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # restored after the test
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    host = RunHost("node-id", one_job=True)
    assert "CUDA_VISIBLE_DEVICES" not in os.environ  # its job is not known yet
    host.events(task(tmp_path, "j1"), "j1", 1, 0, 0)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"  # the lane node/cuda:0
    assert host.runs() == [("j1", 1)]


def test_a_job_actor_takes_later_jobs_on_its_first_jobs_lanes_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # restored after the test
    host = RunHost("node-id", one_job=True)
    for job_id in ("j1", "j2"):  # the same lane: both run here
        host.events(task(tmp_path, job_id), job_id, 1, 0, 0)
        assert isinstance(drain(host, job_id)[-1], Finished)
        host.release(job_id)
    elsewhere = replace(task(tmp_path, "j3"), lanes=("node/cuda:1",))
    with pytest.raises(ValueError, match="cuda:1"):  # its process cannot see that GPU
        host.events(elsewhere, "j3", 1, 0, 0)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"
    assert host.runs() == []


def test_an_actor_sees_only_its_lanes_gpus() -> None:
    assert visible_devices(("n/cuda:1",)) == "1"
    assert visible_devices(("n/cuda:2", "n/cuda:3")) == "2,3"
    assert visible_devices(("n/cpu",)) is None


def test_a_poll_gathers_a_short_run_into_one_answer(tmp_path: Path) -> None:
    host = RunHost("node-id")
    events = host.events(task(tmp_path, "j1"), "j1", 1, 0, WAIT_S, gather_s=WAIT_S)
    assert events is not None
    assert isinstance(events[-1], Finished)
    assert len([e for e in events if isinstance(e, Progressed)]) == 3
