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
    queued job, over `slots`: when a job submitted now could start (`Retry-After`).

    `queued`: how many jobs of each kind wait. `recent`: run times of recently finished jobs of
    each kind, in seconds."""
    ahead = WorkAhead(running, recent, now=now)
    work = ahead.running + sum(count * ahead.typical_run(kind) for kind, count in queued.items())
    return work / max(1, slots)


def expected_starts_s(
    running: Sequence[Job],
    queue: Sequence[JobKind],
    recent: Mapping[JobKind, Sequence[float]],
    *,
    slots: int,
    now: datetime,
) -> list[float]:
    """For each job of `queue` (the kinds of the queued jobs, in start order), its expected wait:
    as `expected_wait_s` says it of a new job, with only the jobs before it as the queue."""
    ahead = WorkAhead(running, recent, now=now)
    work = ahead.running
    starts = []
    for kind in queue:
        starts.append(work / max(1, slots))
        work += ahead.typical_run(kind)
    return starts


class WorkAhead:
    """The seconds of lane time the running jobs still need, and a typical run of each kind."""

    def __init__(
        self, running: Sequence[Job], recent: Mapping[JobKind, Sequence[float]], *, now: datetime
    ) -> None:
        self._recent = recent
        self._every_run = [seconds for runs in recent.values() for seconds in runs]
        self.running = 0.0
        self._running_totals: dict[JobKind, list[float]] = {}
        for job in running:
            elapsed = max(0.0, (now - job.started_at).total_seconds()) if job.started_at else 0.0
            left = _time_left(job, elapsed, self._recent_run(job.kind))
            self.running += left * max(1, len(job.devices))
            self._running_totals.setdefault(job.kind, []).append(elapsed + left)

    def _recent_run(self, kind: JobKind) -> float | None:
        runs = self._recent.get(kind) or self._every_run
        return fmean(runs) if runs else None

    def typical_run(self, kind: JobKind) -> float:
        """From recent runs of the kind (else of any kind); with no finished run to go by, the
        running jobs say how long one takes; with none either, 0."""
        per_job = self._recent_run(kind)
        if per_job is None:
            totals = self._running_totals.get(kind) or [
                t for ts in self._running_totals.values() for t in ts
            ]
            per_job = fmean(totals) if totals else 0.0
        return per_job


def _time_left(job: Job, elapsed: float, typical: float | None) -> float:
    """From its progress when it has made some (the rest at the pace so far); else a typical
    run of its kind less what it has run; else as long again as it has run already."""
    progress = job.progress
    if progress is not None and 0 < progress.done <= progress.total:
        return elapsed * (progress.total - progress.done) / progress.done
    if typical is not None:
        return max(0.0, typical - elapsed)
    return elapsed
