"""Jobs that run on the server itself (`Kind.on_head`: a chain's promotion): no lane, no worker
thread, a few reads and one write. Claimed, run and recorded like any job, so their records,
events, recovery and webhooks are the same."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable

from yolo_orch.dispatch.model_refs import ModelRefs
from yolo_orch.dispatch.run_records import record_outcome
from yolo_orch.domain import Job, JobError, JobResult, JobState, Outcome
from yolo_orch.errors import ErrorCode, InvalidJobInput, YoloOrchError
from yolo_orch.ops.clock import utcnow
from yolo_orch.ops.logs import for_job
from yolo_orch.store.base import JobStore

log = logging.getLogger(__name__)

HeadRunner = Callable[[Job], Awaitable[JobResult]]
"""Runs one on-head job (claimed) to its result; raises a `YoloOrchError` to fail it."""


async def no_head_runner(job: Job) -> JobResult:
    raise InvalidJobInput(f"this server runs no {job.kind} jobs")


class HeadRuns:
    def __init__(self, store: JobStore, runner: HeadRunner) -> None:
        self._store = store
        self._runner = runner
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def __contains__(self, job_id: str) -> bool:
        return job_id in self._tasks

    def start(self, job: Job, refs: ModelRefs, on_end: Callable[[], None]) -> None:
        """Claim and run `job` in a task of its own (its model resolved as `refs` do at a
        start); `on_end` once it is recorded."""
        task = asyncio.create_task(self._run(job, refs, on_end), name=f"job {job.id} (on head)")
        self._tasks[job.id] = task
        task.add_done_callback(lambda _: self._tasks.pop(job.id, None))

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
            result = await self._runner(job)
        except YoloOrchError as exc:
            return Outcome(JobState.FAILED, JobError(exc.code, exc.message))
        except Exception as exc:
            log.exception("job %s failed", job.id, extra=for_job(job.id))
            return Outcome(JobState.FAILED, JobError(ErrorCode.RUNTIME_ERROR, str(exc)))
        kept = json.dumps(result.detail or result.summary).encode()
        return Outcome(JobState.SUCCEEDED, result=result.summary, kept_result=kept)

    async def stop(self) -> None:
        """Wait for the runs under way: each is a few reads and writes."""
        if self._tasks:
            await asyncio.wait(set(self._tasks.values()))
