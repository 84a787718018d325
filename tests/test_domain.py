from __future__ import annotations

from datetime import UTC, datetime

import pytest

from yolo_orch.domain import Job, JobKind, JobState, Outcome, after_interruption

QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = (
    JobState.QUEUED,
    JobState.RUNNING,
    JobState.SUCCEEDED,
    JobState.FAILED,
    JobState.CANCELLED,
)


def test_terminal_states() -> None:
    assert {state for state in JobState if state.is_terminal} == {SUCCEEDED, FAILED, CANCELLED}


@pytest.mark.parametrize(
    ("source", "target", "allowed"),
    [
        (QUEUED, RUNNING, True),
        (QUEUED, CANCELLED, True),
        (QUEUED, SUCCEEDED, False),
        (RUNNING, SUCCEEDED, True),
        (RUNNING, FAILED, True),
        (RUNNING, CANCELLED, True),
        (RUNNING, QUEUED, True),
        (SUCCEEDED, RUNNING, False),
        (FAILED, QUEUED, False),
        (CANCELLED, QUEUED, False),
    ],
)
def test_transitions(source: JobState, target: JobState, allowed: bool) -> None:
    assert source.can_become(target) is allowed


def test_an_outcome_must_be_terminal() -> None:
    with pytest.raises(ValueError, match="terminal"):
        Outcome(RUNNING)


def _running(attempt: int, cancel_requested: bool = False) -> Job:
    return Job(
        id="j",
        seq=1,
        kind=JobKind.INFERENCE,
        state=RUNNING,
        model="sim",
        spec={},
        priority=0,
        gpus=1,
        attempt=attempt,
        max_attempts=3,
        created_at=datetime.now(UTC),
        cancel_requested=cancel_requested,
    )


def test_interrupted_jobs_retry_until_attempts_run_out() -> None:
    assert after_interruption(_running(1)) == (QUEUED, None)
    assert after_interruption(_running(2)) == (QUEUED, None)
    state, error = after_interruption(_running(3))
    assert state is FAILED
    assert error is not None
    assert error.code == "interrupted"
    assert after_interruption(_running(1, cancel_requested=True)) == (CANCELLED, None)
