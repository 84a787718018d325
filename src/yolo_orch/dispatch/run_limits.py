"""How long a run may take and how long its progress may stand still: the rules the
dispatcher's watchdog applies to every running job."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from yolo_orch.domain import Job, JobError
from yolo_orch.errors import ErrorCode


@dataclass(frozen=True)
class RunLimits:
    timeout_s: Mapping[str, float] = field(default_factory=dict)
    """Each kind's time limit when a job's `params.timeout_s` names none; 0 or absent: none."""
    stall_after_s: float = 0.0
    """A run whose progress has not moved for this long is stalled; 0: never."""
    wedge_grace_s: float = 60.0
    """How long a run's thread gets to return once it was told to stop, before its lanes are
    wedged (threads cannot be killed)."""
    check_interval_s: float = 1.0

    def timeout_for(self, job: Job) -> float:
        given = job.params.get("timeout_s")
        return float(given) if given is not None else self.timeout_s.get(job.kind, 0.0)

    def breach(self, timeout_s: float, ran_s: float, still_s: float) -> JobError | None:
        """Why a run that has run `ran_s` with progress still for `still_s` must stop, if so."""
        if timeout_s and ran_s >= timeout_s:
            return JobError(ErrorCode.TIMEOUT, f"the job ran past its time limit of {timeout_s:g}s")
        if self.stall_after_s and still_s >= self.stall_after_s:
            return JobError(
                ErrorCode.STALLED,
                f"the job's progress did not move for {self.stall_after_s:g}s",
            )
        return None
