"""Jobs that run on the server itself (`Kind.on_head`: a chain's promotion, a tune): no lane, no
worker thread. Claimed, run and recorded like any job, so their records, events, recovery and
webhooks are the same. A promotion is a few reads and one write; a tune supervises its trials
for as long as they run (`Kind.resumes`): a drain stops it at once and leaves it running, for
the next start to resume."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping

from yolo_orch.dispatch.model_refs import ModelRefs
from yolo_orch.dispatch.run_records import record_outcome
from yolo_orch.domain import Job, JobError, JobKind, JobResult, JobState, Outcome
from yolo_orch.errors import ErrorCode, InvalidJobInput, JobCancelled, YoloOrchError
from yolo_orch.kinds import KINDS
from yolo_orch.ops.clock import utcnow
from yolo_orch.ops.logs import for_job
from yolo_orch.store.base import JobStore

log = logging.getLogger(__name__)

HeadRunner = Callable[[Job], Awaitable[JobResult]]
"""Runs one on-head job (claimed) to its result; raises a `YoloOrchError` to fail it, and
`JobCancelled` once it stopped because its cancel was asked."""


async def no_head_runner(job: Job) -> JobResult:
    raise InvalidJobInput(f"this server runs no {job.kind} jobs")


class HeadRuns:
    def __init__(self, store: JobStore, runners: Mapping[JobKind, HeadRunner]) -> None:
        """`runners`: by kind; a kind without one fails."""
        self._store = store
        self._runners = runners
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._resuming: set[str] = set()

    def __contains__(self, job_id: str) -> bool:
        return job_id in self._tasks

    def start(self, job: Job, refs: ModelRefs, on_end: Callable[[], None]) -> None:
        """Claim and run `job` in a task of its own (its model resolved as `refs` do at a
        start); `on_end` once it is recorded."""
        task = asyncio.create_task(self._run(job, refs, on_end), name=f"job {job.id} (on head)")
        self._tasks[job.id] = task
        if KINDS[job.kind].resumes:
            self._resuming.add(job.id)
        task.add_done_callback(lambda _: self._forget(job.id))

    def _forget(self, job_id: str) -> None:
        self._tasks.pop(job_id, None)
        self._resuming.discard(job_id)

    async def _run(self, job: Job, refs: ModelRefs, on_end: Callable[[], None]) -> None:
        try:
            ready, refused = await refs.at_start([job])
            if refused:
                await refs.fail(refused)
                return
            job = ready[0]
            claimed = await self._store.claim(job.id, (), utcnow(), job.model_id)
            if claimed is None:
                return  # cancelled meanwhile
            log.info("job %s started on the server", job.id, extra=for_job(job.id))
            outcome = await self._outcome(claimed)
            await record_outcome(self._store, job.id, outcome)  # retried, as a lane's runs are
        except Exception:
            log.exception("could not run or record job %s", job.id, extra=for_job(job.id))
        finally:
            on_end()

    async def _outcome(self, job: Job) -> Outcome:
        try:
            result = await self._runners.get(job.kind, no_head_runner)(job)
        except JobCancelled:
            return Outcome(JobState.CANCELLED)
        except YoloOrchError as exc:
            return Outcome(JobState.FAILED, JobError(exc.code, exc.message))
        except Exception as exc:
            log.exception("job %s failed", job.id, extra=for_job(job.id))
            return Outcome(JobState.FAILED, JobError(ErrorCode.RUNTIME_ERROR, str(exc)))
        kept = json.dumps(result.detail or result.summary).encode()
        return Outcome(JobState.SUCCEEDED, result=result.summary, kept_result=kept)

    async def stop(self) -> None:
        """Wait for the runs under way that are a few reads and writes; stop those that
        supervise others (`Kind.resumes`), which stay running for the next start."""
        for job_id, task in self._tasks.items():
            if job_id in self._resuming:
                task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks.values()))
