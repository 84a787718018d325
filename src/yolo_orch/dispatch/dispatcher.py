"""Takes queued jobs in order, admits them onto lanes, runs them through the executor and records
how each run ended. The only writer of RUNNING and of run outcomes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence

from yolo_orch.dispatch.batching import (
    BatchPolicy,
    companions,
    image_count,
    is_stream,
    stream_fps,
)
from yolo_orch.dispatch.claims import Claims
from yolo_orch.dispatch.executor import Executor
from yolo_orch.dispatch.head_runs import HeadRunner, HeadRuns
from yolo_orch.dispatch.lanes import Lane, Lanes
from yolo_orch.dispatch.model_refs import ModelRefs, no_models
from yolo_orch.dispatch.queue_head import QueueHead
from yolo_orch.dispatch.recovery import settle_left_running
from yolo_orch.dispatch.run_limits import RunLimits
from yolo_orch.dispatch.run_records import OnRunEnd, ProgressWriter, fail_beside, record_outcomes
from yolo_orch.dispatch.runs import (
    Batch,
    OnBatch,
    Run,
    leave_running,
    outcomes_kept,
    run_context,
)
from yolo_orch.dispatch.watchdog import Watchdog
from yolo_orch.domain import Job, JobError, JobKind, Outcome, Progress, QueueOrder, claimed
from yolo_orch.errors import ErrorCode, RunLost
from yolo_orch.files.jobfiles import JobFiles
from yolo_orch.files.shown_paths import ShownPaths
from yolo_orch.kinds import KINDS
from yolo_orch.ops.clock import utcnow
from yolo_orch.ops.logs import current_job, for_job
from yolo_orch.params.stream import shared_pass_key
from yolo_orch.runners.base import BatchOutcome, RunContext
from yolo_orch.runners.failures import failure_of
from yolo_orch.store.base import JobStore

log = logging.getLogger(__name__)


class Dispatcher:
    def __init__(
        self,
        store: JobStore,
        lanes: Lanes,
        executor: Executor,
        files: JobFiles,
        *,
        progress_interval_s: float = 0.25,
        retry_delay_s: float = 1.0,
        limits: RunLimits | None = None,
        priority_aging_per_minute: float = 0.0,
        on_run_end: OnRunEnd | None = None,
        batching: BatchPolicy | None = None,
        on_batch: OnBatch | None = None,
        shown_paths: ShownPaths | None = None,
        model_refs: ModelRefs | None = None,
        head_runners: Mapping[JobKind, HeadRunner] | None = None,
    ) -> None:
        """`shown_paths`: how a failed run's error names the server's files (`server_paths`);
        without it, each absolute path as its last part. `model_refs`: resolves the models
        jobs name by alias or by producing job, at their start (without it, such jobs fail).
        `head_runners`: by kind, the runners of the kinds that run on the server
        (`Kind.on_head`)."""
        self._store = store
        self._lanes = lanes
        self._executor = executor
        self._files = files
        self._progress = ProgressWriter(store, progress_interval_s)
        self._retry_delay_s = retry_delay_s
        self._on_run_end = on_run_end
        self._limits = limits or RunLimits()
        self._aging_per_minute = priority_aging_per_minute
        self._wakeup = asyncio.Event()
        self._queue_changed = asyncio.Event()
        """Set (and replaced) on every wake-up: what a batch waiting for companions waits on."""
        self._batching = batching or BatchPolicy()
        self._on_batch = on_batch
        self._shown_paths = shown_paths or ShownPaths()
        self._runs: dict[str, Run] = {}
        self._head = QueueHead(store)
        self._claims = Claims(store, files.starts, self._head)
        self._stopping = False
        self._admitting = asyncio.Lock()
        self._suspects: set[str] = set()
        """Jobs that were running when the server last died (not those a drain left behind):
        each runs alone once, so a job that kills the server takes no innocent neighbour's
        attempts with it."""
        self.abandoned = 0
        """Runs left behind by `drain`; their worker threads may still be going."""
        self.fatal = asyncio.Event()
        """Set once a sticky CUDA error has poisoned this process: the server must exit (and
        systemd restart it) for CUDA to work again."""
        self._watchdog = Watchdog(store, self._limits, self._runs, self.wake)
        self._model_refs = model_refs or ModelRefs(store, no_models)
        self._head_runs = HeadRuns(store, head_runners or {})

    @property
    def wedged(self) -> asyncio.Event:
        """Set once a run's thread ignored a stop past the grace period and every other run has
        ended: the server must exit (and systemd restart it) to get its lanes back."""
        return self._watchdog.wedged

    @property
    def running_jobs(self) -> list[str]:
        return list(self._runs)

    async def recover(self) -> list[Job]:
        """Settle the jobs a previous process left RUNNING (`recovery.py`); call before `run`.
        Those whose runs went on without it (on a cluster) are followed again, on the lanes
        they hold."""
        left = await settle_left_running(self._store, self._executor, self._files, self._lanes)
        for job, lanes in left.surviving:
            await self._adopt(job, lanes)
        self._suspects = left.suspects
        return left.changed

    async def _adopt(self, job: Job, lanes: tuple[Lane, ...]) -> None:
        """Run a job that is RUNNING already (claimed by an earlier server) on its lanes."""
        for lane in lanes:
            await lane.semaphore.acquire()  # never waits: nothing ran before recovery
            lane.jobs.add(job.id)
        batch = Batch(job.id, lanes)
        self._register(batch, [job], None)
        self._head.claimed({job.id})  # by the earlier server
        run = self._runs[job.id]
        self._took(batch, run, job, asyncio.get_running_loop().time())
        if job.cancel_requested:
            run.cancel.set()
        run.task = asyncio.create_task(self._run_batch(batch, []), name=f"job {job.id}")

    def wake(self) -> None:
        """The queue or the lanes changed: admit what can start now."""
        self._head.forget()
        self._resume()

    def queued(self, job: Job) -> None:
        """`job` was submitted: admit what can start now (a job waiting for others cannot)."""
        if job.blocked:
            return
        self._head.queued(job, self._order())
        self._resume()

    def _resume(self) -> None:
        """Lanes were freed (the queue is as the dispatcher left it)."""
        self._wakeup.set()
        self._queue_changed.set()
        self._queue_changed = asyncio.Event()

    def request_cancel(self, job_id: str) -> None:
        run = self._runs.get(job_id)
        if run is not None:
            run.cancel.set()

    async def run(self) -> None:
        """Admit jobs whenever something changes, until `drain` is called; meanwhile watch the
        running jobs' time limits and progress."""
        watchdog = asyncio.create_task(self._watchdog.run(), name="job-watchdog")
        try:
            await self._admit_until_stopped()
        finally:
            watchdog.cancel()

    async def _admit_until_stopped(self) -> None:
        while not self._stopping:
            self._wakeup.clear()
            try:
                async with self._admitting:
                    await self._admit_waiting()
            except Exception:
                log.exception("admission pass failed; retrying")
                await asyncio.sleep(self._retry_delay_s)
                self.wake()
            await self._wakeup.wait()

    async def drain(self, grace_s: float) -> None:
        """Admit nothing more; give running jobs `grace_s` to finish (streams none: they never
        end by themselves), then abandon the rest (`leave_running`).

        Abandoned jobs stay RUNNING in the store, so recovery requeues them on the next start.
        """
        self._stopping = True
        self.wake()
        async with self._admitting:  # let a pass that is starting a job finish starting it
            await self._head_runs.stop()  # a few reads and writes each
            runs: dict[asyncio.Task[None], list[Run]] = {}
            for run in self._runs.values():
                if run.task is not None:
                    runs.setdefault(run.task, []).append(run)
        abandoned = await leave_running(runs, grace_s, self._files)
        self.abandoned += len(abandoned)
        if abandoned:
            log.warning("left %d running job(s) for recovery at the next start", len(abandoned))

    async def _admit_waiting(self) -> None:
        started = True
        while (
            started
            and not self._stopping
            and not self._watchdog.wedged_runs
            and (self._lanes.free_slots or self._lanes.stream_room)
        ):
            started = False
            window = 2 * self._lanes.total_slots + len(self._lanes) + self._batching.lookahead
            reserved: set[str] = set()
            # Jobs needing more lanes than can take work are not even read: they would fill
            # the window and hide the runnable jobs behind them.
            order = self._order()
            queue = await self._head.first(window, order, asyncio.get_running_loop().time())
            for position, job in enumerate(queue):
                if job.id in self._runs or job.id in self._head_runs:
                    continue  # joined a batch of this pass, or started on the server
                if self._stopping or self._suspects & self._runs.keys():
                    return
                if KINDS[job.kind].on_head:
                    self._head.started({job.id})
                    self._head_runs.start(job, self._model_refs, self.wake)
                    started = True
                    continue
                if self._start_stream(job):
                    started = True
                    continue
                if is_stream(job):
                    continue  # no lane has room for it: it takes none from the jobs behind it
                if len(reserved) == len(self._lanes) or self._lanes.free_slots == 0:
                    if self._lanes.stream_room:
                        continue  # streams behind it may still start
                    return
                if job.id in self._suspects and self._runs:
                    return  # it waits for the lanes to empty, and nothing behind it starts
                lanes = await self._lanes.try_admit(job.id, job.gpus, reserved)
                if lanes is None:
                    reserved |= self._lanes.lanes_to_hold(job.gpus, reserved)
                    continue
                batch = Batch(job.id, lanes, room=self._room(job, lanes))
                joined = self._companions(job, batch, queue[position + 1 :], order)
                self._start(batch, [job, *joined])
                started = True

    def _start_stream(self, job: Job) -> bool:
        """Start a stream on a share of a lane, if one has room: it takes no turn."""
        if not is_stream(job):
            return False
        lane = self._lanes.try_admit_stream(job.id, stream_fps(job), shared_pass_key(job))
        if lane is None:
            return False
        self._start(Batch(job.id, (lane,)), [job])
        return True

    def _order(self) -> QueueOrder:
        return QueueOrder(utcnow(), self._aging_per_minute, self._lanes.healthy_count)

    def queue_order(self) -> QueueOrder:
        """The order jobs start in now (by effective priority, aging included), for those who
        show the queue."""
        return self._order()

    def _room(self, head: Job, lanes: tuple[Lane, ...]) -> int:
        """Images a batch headed by `head` may take besides its own: none for a job that runs
        alone (several lanes, or a suspect of the last crash)."""
        if len(lanes) != 1 or head.id in self._suspects:
            return 0
        return self._batching.capacity(lanes[0].id) - image_count(head)

    def _companions(
        self, head: Job, batch: Batch, queue: Sequence[Job], order: QueueOrder
    ) -> list[Job]:
        return companions(
            head,
            queue,
            order,
            batch.room,
            excluded=lambda job: job.id in self._runs,
            stop_at=lambda job: job.id in self._suspects,
        )

    def _start(self, batch: Batch, jobs: list[Job]) -> None:
        """Run `jobs` (a batch's head first) in a task of their own: the claims of jobs started
        together share one commit, and admission never waits for one."""
        task = asyncio.create_task(self._run_batch(batch, jobs), name=f"job {batch.holder}")
        self._register(batch, jobs, task)

    def _register(self, batch: Batch, jobs: list[Job], task: asyncio.Task[None] | None) -> None:
        """Before the claim, so that a cancel racing it finds the run."""
        for job in jobs:
            run = Run(job.id, task=task, stream=is_stream(job))
            self._runs[job.id] = run
            batch.runs.append(run)
        self._head.started({job.id for job in jobs})
        self._lanes.ride([job.id for job in jobs if job.id != batch.holder], batch.lanes)

    async def _claim(self, batch: Batch, jobs: list[Job]) -> None:
        """Claim `jobs` (registered) for `batch`; those cancelled meanwhile are let go."""
        devices = tuple(lane.id for lane in batch.lanes)
        claims = await self._claims.take(jobs, devices, utcnow())
        started = asyncio.get_running_loop().time()
        for job, claimed_job in zip(jobs, claims, strict=True):
            if claimed_job is None:
                self._let_go(batch, job.id)
            else:
                self._took(batch, self._runs[job.id], claimed_job, started)

    def _let_go(self, batch: Batch, job_id: str) -> None:
        """A registered job that will not run in `batch` after all."""
        run = self._runs.pop(job_id)
        self._lanes.unride(job_id, batch.lanes)
        batch.runs.remove(run)

    def _claim_meanwhile(self, batch: Batch, jobs: list[Job]) -> asyncio.Task[set[str]]:
        """Take `jobs` (registered) into `batch` as their claims will make them, and claim them
        while their runs start (`Claims.meanwhile`)."""
        devices = tuple(lane.id for lane in batch.lanes)
        now = utcnow()
        started = asyncio.get_running_loop().time()
        runs = [self._runs[job.id] for job in jobs]
        for job, run in zip(jobs, runs, strict=True):
            self._took(batch, run, claimed(job, devices, now), started)
        return self._claims.meanwhile(jobs, devices, now, [run.cancel for run in runs])

    def _took(self, batch: Batch, run: Run, job: Job, started: float) -> None:
        """A claimed job joins its batch; its time limits count from `started`."""
        run.lanes = batch.lanes
        run.timeout_s = self._limits.timeout_for(job)
        run.started = run.moved = started
        batch.jobs.append(job)
        if job.id != batch.holder:
            batch.room -= image_count(job)

    def _free_turn(self, batch: Batch) -> None:
        """The lane's turn goes back once the work is done, so the next job's claim shares a
        commit with these outcomes rather than waiting for them."""
        for run in batch.runs:
            self._lanes.unride(run.job_id, batch.lanes)
        self._lanes.release(batch.holder, batch.lanes)
        self._resume()

    def _release(self, batch: Batch) -> None:
        for run in batch.runs:
            self._runs.pop(run.job_id, None)
            self._suspects.discard(run.job_id)
            self._lanes.unride(run.job_id, batch.lanes)
        self._suspects.discard(batch.holder)
        self._lanes.release(batch.holder, batch.lanes)
        self._resume()

    async def _run_batch(self, batch: Batch, jobs: list[Job]) -> None:
        """Claim `jobs` for `batch` (besides any it holds already), run and record them."""
        loop = asyncio.get_running_loop()
        claiming: asyncio.Task[set[str]] | None = None
        try:
            jobs = await self._at_start(batch, jobs)
            # A suspect of the last crash waits for its claim: its attempt is counted before
            # it can crash the server again.
            if (
                self._executor.starts_unclaimed
                and jobs
                and not self._suspects & {j.id for j in jobs}
            ):
                claiming = self._claim_meanwhile(batch, jobs)
            else:
                await self._claim(batch, jobs)
            if not batch.jobs:
                return
            batch.formed = loop.time()
            if batch.room > 0 and self._batching.window_s > 0:
                await self._fill(batch)
            current_job.set(batch.jobs[0].id)  # this task's context, inherited by the worker thread
            lane = batch.lanes[0].id
            if (
                self._on_batch is not None
                and self._batching.capacity(lane) > 1
                and not is_stream(batch.jobs[0])
            ):
                self._on_batch(lane, len(batch.jobs), loop.time() - batch.formed)
            ctxs = [
                self._context(job, run) for job, run in zip(batch.jobs, batch.runs, strict=True)
            ]
            started = loop.time()
            ran = list(zip(batch.jobs, await self._execute(batch, ctxs), strict=True))
            unclaimed: set[str] = set()
            if claiming is not None:  # a job cancelled before its claim has no outcome to record
                unclaimed = await claiming
                ran = [(job, outcome) for job, outcome in ran if job.id not in unclaimed]
            ended = await record_outcomes(
                self._store, self._executor, ran, started, self._on_run_end, unclaimed
            )
            if len(ended) < len(ran):  # lost runs went back to the queue
                self._head.forget()
            for job, outcome in ended:
                if outcome.error is not None and outcome.error.code == ErrorCode.CUDA_FATAL:
                    await self._poisoned(job.id, outcome.error)
                    break
        except asyncio.CancelledError:
            raise  # abandoned at shutdown: the jobs stay RUNNING for recovery
        except Exception:
            log.exception("could not run or record the batch of %s", batch.holder)
        finally:
            for run in batch.runs:
                if run.progress_writer is not None:
                    run.progress_writer.cancel()
            self._release(batch)

    async def _fill(self, batch: Batch) -> None:
        """Wait up to the batching window for companions to join (the lane's turn is held)."""
        loop = asyncio.get_running_loop()
        deadline = batch.formed + self._batching.window_s
        task = asyncio.current_task()
        while batch.room > 0 and not self._stopping and loop.time() < deadline:
            changed = self._queue_changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), deadline - loop.time())
            async with self._admitting:
                order = self._order()
                queue = await self._head.read(self._batching.lookahead * 2, order)
                joined = self._companions(batch.jobs[0], batch, queue, order)
                self._register(batch, joined, task)
            joined = await self._at_start(batch, joined)
            if joined:
                await self._claim(batch, joined)

    async def _at_start(self, batch: Batch, jobs: list[Job]) -> list[Job]:
        """`jobs` (registered) with the models their references name now; those naming none
        fail (`model_not_found`) without a run and leave the batch."""
        ready, refused = await self._model_refs.at_start(jobs)
        for job, _ in refused:
            self._let_go(batch, job.id)
            self._head.claimed({job.id})
        await self._model_refs.fail(refused)
        return ready

    def _context(self, job: Job, run: Run) -> RunContext:
        devices = ", ".join(lane.id for lane in run.lanes)
        started = "job %s started on %s (attempt %d)"
        log.info(started, job.id, devices, job.attempt, extra=for_job(job.id))
        workdir = self._files.workdir(job.id)
        return run_context(job, run, workdir, self._note_progress, self._note_model)

    async def _poisoned(self, culprit: str, error: JobError) -> None:
        """Admit nothing more, fail the other jobs running in this CUDA context, and say the
        process must end; queued jobs wait for the next start."""
        fatal = "job %s hit a fatal CUDA error; the server must restart"
        log.critical(fatal, culprit, extra=for_job(culprit))
        self._stopping = True
        self.wake()
        await fail_beside(self._store, self._runs.values(), culprit, error)
        self.fatal.set()

    async def _execute(self, batch: Batch, ctxs: list[RunContext]) -> list[Outcome | RunLost]:
        """Run the jobs (alone, or as a batch sharing forward passes), give back the lane's turn
        and write each one's result; each job's outcome is its own."""
        raw: list[BatchOutcome]
        try:
            if len(ctxs) == 1:
                raw = [await self._executor.run(ctxs[0])]
            else:
                raw = await self._executor.run_batch(ctxs)
        except Exception as exc:
            raw = [exc] * len(ctxs)
        if any(_poisons(outcome) for outcome in raw):
            self._stopping = True  # before the turn goes back: nothing more may start here
        self._free_turn(batch)
        return await outcomes_kept(self._files, self._runs, ctxs, raw, self._shown_paths)

    def _note_model(self, run: Run, model_id: str) -> None:
        if self._runs.get(run.job_id) is run:  # not after the run ended or was left
            self._progress.switched(run, model_id)

    def _note_progress(self, run: Run, progress: Progress) -> None:
        if self._runs.get(run.job_id) is run:  # not reported after the run ended or was left
            self._progress.note(run, progress)


def _poisons(outcome: BatchOutcome) -> bool:
    return isinstance(outcome, Exception) and failure_of(outcome).code == ErrorCode.CUDA_FATAL
