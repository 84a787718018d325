"""How long a new job would wait to start: the work ahead of it, spread over the lanes' slots.
Plain arithmetic on jobs; the service reads them from the store and says it as `Retry-After`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from statistics import fmean

from yolo_orch.domain import Job, JobKind


def expected_wait_s(
    running: Sequence[Job],
    queued: Mapping[JobKind, int],
    recent: Mapping[JobKind, Sequence[float]],
    *,
    slots: int,
    now: datetime,
) -> float:
    """What is left of each running job (times the lanes it holds), plus a typical run of each
    queued job, over `slots`.

    `queued`: how many jobs of each kind wait. `recent`: run times of recently finished jobs of
    each kind, in seconds."""
    every_run = [seconds for runs in recent.values() for seconds in runs]

    def typical(kind: JobKind) -> float | None:
        runs = recent.get(kind) or every_run
        return fmean(runs) if runs else None

    work = 0.0
    running_totals: dict[JobKind, list[float]] = {}
    for job in running:
        elapsed = max(0.0, (now - job.started_at).total_seconds()) if job.started_at else 0.0
        left = _time_left(job, elapsed, typical(job.kind))
        work += left * max(1, len(job.devices))
        running_totals.setdefault(job.kind, []).append(elapsed + left)
    for kind, count in queued.items():
        # With no finished run to go by, the running jobs say how long one takes.
        per_job = typical(kind)
        if per_job is None:
            totals = running_totals.get(kind) or [t for ts in running_totals.values() for t in ts]
            per_job = fmean(totals) if totals else 0.0
        work += count * per_job
    return work / max(1, slots)


def _time_left(job: Job, elapsed: float, typical: float | None) -> float:
    """From its progress when it has made some (the rest at the pace so far); else a typical
    run of its kind less what it has run; else as long again as it has run already."""
    progress = job.progress
    if progress is not None and 0 < progress.done <= progress.total:
        return elapsed * (progress.total - progress.done) / progress.done
    if typical is not None:
        return max(0.0, typical - elapsed)
    return elapsed
