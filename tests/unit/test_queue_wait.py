"""The expected wait that a 429's Retry-After says: the work ahead of a new job over the slots."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from yolo_orch.dispatch.queue_wait import expected_starts_s, expected_wait_s
from yolo_orch.domain import Job, JobKind, JobState, Progress

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
INFERENCE, TRAINING = JobKind.INFERENCE, JobKind.TRAINING


def running_job(
    kind: JobKind, ran_s: float, progress: tuple[int, int] | None = None, lanes: int = 1
) -> Job:
    return Job(
        id=f"{kind}-{ran_s}",
        seq=1,
        kind=kind,
        state=JobState.RUNNING,
        model="sim",
        spec={},
        priority=0,
        gpus=lanes,
        attempt=1,
        max_attempts=3,
        created_at=NOW - timedelta(seconds=ran_s),
        devices=tuple(f"sim:{i}" for i in range(lanes)),
        progress=None if progress is None else Progress(*progress, unit="steps"),
        started_at=NOW - timedelta(seconds=ran_s),
    )


def wait(
    running: list[Job],
    queued: dict[JobKind, int] | None = None,
    recent: dict[JobKind, list[float]] | None = None,
    slots: int = 1,
) -> float:
    return expected_wait_s(running, queued or {}, recent or {}, slots=slots, now=NOW)


def test_a_long_job_with_quick_ones_behind_it_is_a_long_wait() -> None:
    # The case: inference runs take 1 s, but the one running job is a training that
    # has done 1 epoch of 10 in 60 s: it has about 9 minutes left.
    long = running_job(TRAINING, 60, progress=(1, 10))
    assert wait([long], {INFERENCE: 1}, {INFERENCE: [1.0, 1.0]}) == pytest.approx(540 + 1)


def test_without_progress_the_typical_run_of_the_kind_less_what_it_ran() -> None:
    job = running_job(TRAINING, 100)
    assert wait([job], recent={TRAINING: [400.0, 600.0], INFERENCE: [1.0]}) == 400
    assert wait([running_job(TRAINING, 800)], recent={TRAINING: [500.0]}) == 0


def test_with_no_finished_run_a_job_runs_as_long_again_and_so_does_each_queued_one() -> None:
    job = running_job(TRAINING, 120)
    assert wait([job]) == 120
    assert wait([job], {TRAINING: 2}) == 120 + 2 * 240


def test_the_work_is_spread_over_the_slots_and_a_job_weighs_by_its_lanes() -> None:
    recent = {INFERENCE: [10.0]}
    assert wait([], {INFERENCE: 8}, recent, slots=4) == 20
    two_lanes = running_job(TRAINING, 30, progress=(1, 2), lanes=2)
    assert wait([two_lanes], slots=2) == 30


def test_an_empty_queue_is_no_wait() -> None:
    assert wait([], {INFERENCE: 0, TRAINING: 0}, {INFERENCE: [5.0]}) == 0


def test_each_queued_job_starts_when_a_new_job_would_with_only_those_before_it_queued() -> None:
    """The queue view's expected starts and Retry-After are one estimate."""
    running = [running_job(TRAINING, 100, progress=(1, 4)), running_job(INFERENCE, 2)]
    recent = {INFERENCE: [4.0, 6.0], TRAINING: [600.0]}
    queue = [INFERENCE, TRAINING, INFERENCE, INFERENCE]
    starts = expected_starts_s(running, queue, recent, slots=2, now=NOW)
    for position in range(len(queue)):
        before = queue[:position]
        counts = {kind: before.count(kind) for kind in set(before)}
        assert starts[position] == pytest.approx(
            expected_wait_s(running, counts, recent, slots=2, now=NOW)
        )
    assert starts == sorted(starts)
    assert starts[1] - starts[0] == pytest.approx(5.0 / 2)  # an inference's typical run ahead
    assert expected_starts_s([], [], recent, slots=2, now=NOW) == []
