"""Runs tune jobs (`kinds/tune.py`) on the server, as the dispatcher's head runner for the kind:
Optuna's ask-and-tell over trials that are training jobs of their own.

Each trial is submitted as a training through the job service (as a client's, checked the same
way), a child of the tune (`parent_id`, and the tune's chain), and admitted onto lanes by the
dispatcher like any training; at most `parallel` are queued or running at once. While they run,
each one's per-epoch scores (its metrics file, as the runtime rewrites it after each epoch) are
reported to Optuna; a trial the pruner stops is cancelled.

The study's state is the store's: at each start the study is rebuilt from the children
(`tune_study.rebuild`), so a restart never runs a finished trial again and follows the running
ones where they are. The one thing only the tune knows, that it pruned a trial (its training
then ends cancelled, as one cancelled by hand would), is written to the tune's folder before the
cancel is asked for."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

import anyio.to_thread

from yolo_orch.domain import Job, JobFilter, JobKind, JobResult, JobState, NewJob, Progress
from yolo_orch.domain.specs import TrainingSpec, TuneSpec
from yolo_orch.domain.tune_results import TrialState as Ended
from yolo_orch.domain.tune_results import TuneResultDetail, TuneTrial
from yolo_orch.errors import (
    JobAlreadyFinished,
    JobCancelled,
    NoTrialCompleted,
    QueueFull,
    ShuttingDown,
)
from yolo_orch.files.jobfiles import JobFiles, write_atomic
from yolo_orch.ops.logs import for_job
from yolo_orch.params.tune import TuneParams
from yolo_orch.store.base import JobStore

if TYPE_CHECKING:
    from optuna.trial import Trial

    from yolo_orch.jobs import tune_study

log = logging.getLogger(__name__)

PRUNED_FILE = "pruned.json"
"""In the tune's folder: `{trial job id: epoch}` of each trial the tune pruned."""
_PAGE = 100


class TrialJobs(Protocol):
    """Where trials are submitted and cancelled: the job service."""

    async def submit(self, new: NewJob, /) -> tuple[Job, bool]: ...

    async def cancel(self, job_id: str, /) -> Job: ...


def trial_model_name(tune_id: str, number: int) -> str:
    """The name each trial's training registers its model under."""
    return f"tune-{tune_id[:8]}-trial-{number}"


class Tunes:
    def __init__(
        self, store: JobStore, files: JobFiles, slot_count: Callable[[], int], poll_s: float = 0.25
    ) -> None:
        """`slot_count`: the jobs the lanes run at once, the default of `parallel` (a lane of
        two slots runs two trials); `poll_s`: how often running trials are looked at."""
        self._store = store
        self._files = files
        self._slot_count = slot_count
        self._poll_s = poll_s
        self._jobs: TrialJobs | None = None

    def attach(self, jobs: TrialJobs) -> None:
        """Wiring: the job service is built after the dispatcher that runs tunes."""
        self._jobs = jobs

    async def run(self, job: Job) -> JobResult:
        if self._jobs is None:
            raise RuntimeError("Tunes.attach was not called")
        return await _Study(self, self._jobs, job).run()


@dataclass
class _Trial:
    number: int
    job_id: str
    params: dict[str, Any]
    asked: Trial | None
    """Optuna's trial while its training is queued or running."""
    reported: int = 0
    """The last epoch reported to Optuna."""
    ended: Ended | None = None
    value: float | None = None
    pruned_at: int | None = None
    model_id: str | None = None
    intermediate: dict[int, float] = field(default_factory=dict)

    def shown(self) -> TuneTrial:
        return TuneTrial(
            number=self.number,
            job_id=self.job_id,
            params=self.params,
            value=self.value,
            state=self.ended or "failed",
            pruned_at_epoch=self.pruned_at,
            model_id=self.model_id,
        )


class _Study:
    """One run of one tune job: rebuilt from the store, then driven until every trial ended."""

    def __init__(self, tunes: Tunes, jobs: TrialJobs, job: Job) -> None:
        self._store = tunes._store
        self._files = tunes._files
        self._jobs = jobs
        self._poll_s = tunes._poll_s
        self._job = job
        self._spec = job.spec_as(TuneSpec)
        self._params = TuneParams.from_job(job.params)
        self._space = _study().search_space(self._params)
        self._parallel = self._params.parallel or max(1, tunes._slot_count())
        self._objective = self._params.objective
        self._trials: list[_Trial] = []
        self._pending: Trial | None = None
        """Asked of Optuna, not yet stored (the queue was full)."""
        self._progress: Progress | None = None

    async def run(self) -> JobResult:
        await self._rebuild()
        try:
            while True:
                if (await self._store.get(self._job.id)).cancel_requested:
                    raise JobCancelled(f"cancelled after {self._ended()} trials")
                await self._follow()
                if self._ended() == self._params.trials:
                    break
                await self._submit_more()
                await self._note_progress()
                await asyncio.sleep(self._poll_s)
        except (Exception, asyncio.CancelledError) as exc:
            # A drain (CancelledError) leaves the trials running: the next start follows them.
            if not isinstance(exc, asyncio.CancelledError):
                await self._cancel_running()
            raise
        return self._result()

    def _ended(self) -> int:
        return sum(trial.ended is not None for trial in self._trials)

    def _running(self) -> list[_Trial]:
        return [trial for trial in self._trials if trial.ended is None]

    # -- start: the study as the store has it

    async def _rebuild(self) -> None:
        children = await self._children()
        pruned = await anyio.to_thread.run_sync(self._read_pruned)
        stored: list[tune_study.StoredTrial] = []
        trials: list[_Trial] = []
        for number, child in enumerate(children):
            params = {name: child.params.get(name) for name in self._params.space}
            trial = _Trial(number, child.id, params, None)
            trial.intermediate = await self._scores(child.id)
            trial.reported = max(trial.intermediate, default=0)
            if child.state.is_terminal:
                self._ended_as(trial, child, pruned)
            trials.append(trial)
            stored.append(
                _study().StoredTrial(params, trial.intermediate, trial.ended, trial.value)
            )
        self._study, asked = _study().rebuild(self._params, stored)
        running = iter(asked)
        for trial in trials:
            if trial.ended is None:
                trial.asked = next(running)
                if trial.job_id in pruned:  # pruned before the restart, not yet cancelled
                    trial.pruned_at = pruned[trial.job_id]
                    await self._cancel(trial.job_id)
        self._trials = trials
        if trials:
            log.info(
                "tune %s resumed: %d trials stored, %d running",
                self._job.id,
                len(trials),
                len(self._running()),
                extra=for_job(self._job.id),
            )

    async def _children(self) -> list[Job]:
        """The tune's trials, in the order they were submitted."""
        found: list[Job] = []
        cursor = None
        while True:
            where = JobFilter(kinds=(JobKind.TRAINING,), chain_id=self._job.id)
            page = await self._store.list_jobs(where, limit=_PAGE, before_seq=cursor)
            found += [job for job in page.jobs if job.parent_id == self._job.id]
            if page.next_cursor is None:
                return sorted(found, key=lambda job: job.seq)
            cursor = page.next_cursor

    def _read_pruned(self) -> dict[str, int]:
        try:
            loaded = json.loads((self._files.workdir(self._job.id) / PRUNED_FILE).read_bytes())
        except (OSError, ValueError):
            return {}
        return {str(k): int(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}

    def _write_pruned(self, pruned: dict[str, int]) -> None:
        folder = self._files.workdir(self._job.id)
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(folder / PRUNED_FILE, json.dumps(pruned).encode())

    # -- each poll: the running trials, then new ones

    async def _follow(self) -> None:
        for trial in self._running():
            child = await self._store.get(trial.job_id)
            reported = await self._report(trial)
            if child.state.is_terminal:
                self._ended_as(trial, child, await anyio.to_thread.run_sync(self._read_pruned))
                self._tell(trial)
            elif (
                reported
                and trial.pruned_at is None
                and trial.asked is not None
                and trial.asked.should_prune()
            ):
                await self._prune(trial)

    async def _report(self, trial: _Trial) -> bool:
        """Optuna hears of each epoch once, in order; whether it heard of a new one."""
        trial.intermediate = await self._scores(trial.job_id)
        before = trial.reported
        for epoch in sorted(trial.intermediate):
            if epoch > trial.reported and trial.asked is not None:
                trial.asked.report(trial.intermediate[epoch], epoch)
                trial.reported = epoch
        return trial.reported > before

    async def _scores(self, job_id: str) -> dict[int, float]:
        """The objective after each epoch, from the training's metrics file."""
        raw = await anyio.to_thread.run_sync(self._files.read_metrics, job_id)
        try:
            history = json.loads(raw)
        except ValueError:  # rewritten atomically; unreadable only if damaged: read it later
            return {}
        scores: dict[int, float] = {}
        for entry in history if isinstance(history, list) else []:
            value = entry.get(self._objective) if isinstance(entry, dict) else None
            if isinstance(value, int | float) and isinstance(entry.get("epoch"), int):
                scores[entry["epoch"]] = float(value)
        return scores

    async def _prune(self, trial: _Trial) -> None:
        trial.pruned_at = trial.reported
        pruned = await anyio.to_thread.run_sync(self._read_pruned)
        pruned[trial.job_id] = trial.reported
        await anyio.to_thread.run_sync(self._write_pruned, pruned)  # before the cancel
        log.info(
            "tune %s: trial %d (job %s) pruned after epoch %d",
            self._job.id,
            trial.number,
            trial.job_id,
            trial.reported,
            extra=for_job(self._job.id),
        )
        await self._cancel(trial.job_id)

    def _ended_as(self, trial: _Trial, child: Job, pruned: dict[str, int]) -> None:
        result = child.result or {}
        if child.state is JobState.SUCCEEDED:
            value = (result.get("metrics") or {}).get(self._objective)
            trial.value = float(value) if isinstance(value, int | float) else None
            trial.ended = "complete" if trial.value is not None else "failed"
            trial.model_id = result.get("model_id")
            trial.pruned_at = None  # it ended before the cancel reached it
        elif child.state is JobState.CANCELLED and child.id in pruned:
            trial.ended, trial.pruned_at = "pruned", pruned[child.id]
            trial.value = trial.intermediate.get(trial.pruned_at)
        else:
            trial.ended = "cancelled" if child.state is JobState.CANCELLED else "failed"

    def _tell(self, trial: _Trial) -> None:
        if trial.asked is not None and trial.ended is not None:
            _study().tell(self._study, trial.asked, trial.ended, trial.value)
            trial.asked = None

    async def _submit_more(self) -> None:
        while (
            len(self._running()) < self._parallel
            and len(self._trials) < self._params.trials
            and not (await self._store.get(self._job.id)).cancel_requested
        ):
            asked = self._pending or self._study.ask(self._space)
            self._pending = asked
            number = len(self._trials)
            try:
                child, _ = await self._jobs.submit(self._trial_job(number, asked.params))
            except (QueueFull, ShuttingDown):
                return  # asked again at the next poll, with the same params
            self._pending = None
            self._trials.append(_Trial(number, child.id, dict(asked.params), asked))
            log.info(
                "tune %s: trial %d is job %s: %s",
                self._job.id,
                number,
                child.id,
                asked.params,
                extra=for_job(self._job.id),
            )

    def _trial_job(self, number: int, sampled: dict[str, Any]) -> NewJob:
        job = self._job
        params = self._params.trial_params(sampled, trial_model_name(job.id, number))
        return NewJob(
            kind=JobKind.TRAINING,
            model=job.model_id or job.model,  # every trial the model the tune started with
            spec=TrainingSpec(dataset=self._spec.dataset, params=params),
            priority=job.priority,
            max_attempts=job.max_attempts,
            parent_id=job.id,
            chain_id=job.id,
        )

    async def _note_progress(self) -> None:
        best = self._best()
        detail = {
            "running": len(self._running()),
            "best": None if best is None else {"number": best.number, "value": best.value},
        }
        progress = Progress(self._ended(), self._params.trials, "trials", detail)
        if progress != self._progress:
            await self._store.set_progress(self._job.id, progress)
            self._progress = progress

    # -- the end

    async def _cancel(self, job_id: str) -> None:
        with contextlib.suppress(JobAlreadyFinished):
            await self._jobs.cancel(job_id)

    async def _cancel_running(self) -> None:
        """The tune is cancelled or failed: its trials stop too."""
        for trial in self._running():
            try:
                await self._cancel(trial.job_id)
            except Exception:
                log.exception("could not cancel trial job %s", trial.job_id)

    def _best(self) -> _Trial | None:
        complete = [t for t in self._trials if t.ended == "complete" and t.value is not None]
        return max(complete, key=lambda t: (t.value or 0.0, -t.number), default=None)

    def _result(self) -> JobResult:
        best = self._best()
        if best is None:
            raise NoTrialCompleted(
                f"none of the {len(self._trials)} trials completed with a {self._objective!r} "
                "score: see each trial's job"
            )
        shown = [trial.shown() for trial in self._trials]
        detail = TuneResultDetail(objective=self._objective, trials=shown, best=best.shown())
        counts = {state: sum(t.ended == state for t in self._trials) for state in _STATES}
        summary = {
            "objective": self._objective,
            "trials": len(self._trials),
            **counts,
            "best": best.shown().model_dump(mode="json"),
            # What a step of the tune's chain (`then`) runs on: the best trial's model.
            "model_id": best.model_id,
        }
        return JobResult(summary=summary, detail=detail.model_dump(mode="json"))


_STATES = ("complete", "pruned", "failed", "cancelled")


@functools.cache
def _study() -> ModuleType:
    """`tune_study`, and Optuna with it, imported when a tune first runs: Optuna's import is
    about a fifth of the server's start-up, which every restart (and a standby's takeover)
    would otherwise pay for tunes it may never run."""
    from yolo_orch.jobs import tune_study

    return tune_study
