"""Run contexts whose starts are journaled, for the tests of the start journal and of unclaimed
starts."""

from __future__ import annotations

from pathlib import Path

from yolo_orch.domain import Job, JobKind, JobState, Progress
from yolo_orch.ops.clock import utcnow
from yolo_orch.runners.base import RunContext


def context(job_id: str, attempt: int, devices: tuple[str, ...] = ("sim:0",)) -> RunContext:
    job = Job(
        id=job_id,
        seq=1,
        kind=JobKind.INFERENCE,
        state=JobState.RUNNING,
        model="sim",
        spec={},
        priority=0,
        gpus=len(devices),
        attempt=attempt,
        max_attempts=3,
        created_at=utcnow(),
        devices=devices,
    )

    def ignore(progress: Progress) -> None:
        pass

    return RunContext(job, devices, Path("/nonexistent"), ignore, lambda: False)
