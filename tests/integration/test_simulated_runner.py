"""The simulated runner's safe points: a cancel seen at a step's start ends the pass there."""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

from tests.support.start_journal import context as journal_context
from yolo_orch.errors import JobCancelled
from yolo_orch.runners.base import RunContext
from yolo_orch.runners.simulated import SimulatedRunner

LONG_STEP_S = 60.0


def context(
    job_id: str, tmp_path: Path, cancel: threading.Event, step_s: float = LONG_STEP_S
) -> RunContext:
    """A 2-step simulated inference of `2 * step_s` seconds, cancelled when `cancel` is set."""
    base = journal_context(job_id, 1)
    params = {"sim_seconds": 2 * step_s, "sim_steps": 2}
    job = replace(base.job, spec={"inputs": ["x.jpg"], "params": params})
    return replace(base, job=job, workdir=tmp_path, should_cancel=cancel.is_set)


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
