"""The simulated runner's safe points: a cancel seen at a step's start ends the pass there."""

from __future__ import annotations

import threading
from pathlib import Path

from yolo_orch.clock import utcnow
from yolo_orch.domain import Job, JobKind, JobState, Progress
from yolo_orch.errors import JobCancelled
from yolo_orch.runners.base import RunContext
from yolo_orch.runners.simulated import SimulatedRunner

LONG_STEP_S = 60.0


def context(
    job_id: str, tmp_path: Path, cancel: threading.Event, step_s: float = LONG_STEP_S
) -> RunContext:
    job = Job(
        id=job_id,
        seq=1,
        kind=JobKind.INFERENCE,
        state=JobState.RUNNING,
        model="sim",
        spec={"inputs": ["x.jpg"], "params": {"sim_seconds": 2 * step_s, "sim_steps": 2}},
        priority=0,
        gpus=1,
        attempt=1,
        max_attempts=1,
        created_at=utcnow(),
        devices=("sim:0",),
    )

    def ignore(progress: Progress) -> None:
        pass

    return RunContext(job, ("sim:0",), tmp_path, ignore, cancel.is_set)


def test_a_pass_whose_jobs_are_all_cancelled_ends_without_sleeping_out_its_step(
    tmp_path: Path,
) -> None:
    cancel = threading.Event()
    cancel.set()
    outcomes: list[object] = []
    runner = SimulatedRunner()
    ctxs = [context(name, tmp_path, cancel) for name in ("a", "b")]
    worker = threading.Thread(target=lambda: outcomes.extend(runner.run_batch(ctxs)), daemon=True)
    worker.start()
    worker.join(LONG_STEP_S / 4)  # a step is LONG_STEP_S: still asleep in it, had it not ended
    assert not worker.is_alive()
    assert [type(outcome) for outcome in outcomes] == [JobCancelled, JobCancelled]


def test_a_pass_goes_on_for_its_jobs_not_cancelled(tmp_path: Path) -> None:
    cancelled, going = threading.Event(), threading.Event()
    cancelled.set()
    ctxs = [context("a", tmp_path, cancelled, 1.0), context("b", tmp_path, going, 1.0)]
    outcomes: list[object] = []
    worker = threading.Thread(
        target=lambda: outcomes.extend(SimulatedRunner().run_batch(ctxs)), daemon=True
    )
    worker.start()
    worker.join(0.5)
    assert worker.is_alive()  # "b" still in its first step
    worker.join(LONG_STEP_S)
    assert type(outcomes[0]) is JobCancelled
    assert not isinstance(outcomes[1], Exception)
