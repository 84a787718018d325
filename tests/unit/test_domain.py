from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from yolo_orch.domain import (
    MODEL_NAME_MAX_LENGTH,
    MODEL_NAME_PATTERN,
    Job,
    JobKind,
    JobState,
    Outcome,
    after_interruption,
    model_name_from_file,
)

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


@pytest.mark.parametrize(
    ("file_name", "name"),
    [
        ("yolo11n.pt", "yolo11n"),
        ("weights/best.v2.pt", "best.v2"),
        ("C:\\models\\mine.pt", "mine"),
        ("my weights (v2).pt", "my-weights-v2"),
        ("modèle_été.pt", "mod-le_-t"),
        ("..pt", "model"),
        (".hidden", "hidden"),
        ("модель.pt", "model"),
        ("", "model"),
        ("x" * 300 + ".pt", "x" * MODEL_NAME_MAX_LENGTH),
    ],
)
def test_a_name_derived_from_a_file_follows_the_name_rules(file_name: str, name: str) -> None:
    derived = model_name_from_file(file_name)
    assert derived == name
    assert re.fullmatch(MODEL_NAME_PATTERN, derived)
    assert len(derived) <= MODEL_NAME_MAX_LENGTH
