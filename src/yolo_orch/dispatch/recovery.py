"""At start-up, the jobs a previous server left RUNNING: those whose runs went on without it (on
a cluster: in their actors) are to be followed again on the lanes they hold; the others are
requeued or failed by the usual rules (`JobStore.recover`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import anyio.to_thread

from yolo_orch.dispatch.batching import is_stream
from yolo_orch.dispatch.executor import Executor
from yolo_orch.dispatch.lanes import Lane, Lanes
from yolo_orch.domain import Job, JobState
from yolo_orch.errors import JobNotFound
from yolo_orch.files.jobfiles import JobFiles
from yolo_orch.files.start_journal import Started
from yolo_orch.kinds import KINDS
from yolo_orch.ops.clock import utcnow
from yolo_orch.store.base import JobStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeftRunning:
    changed: list[Job]
    """Requeued or failed."""
    surviving: list[tuple[Job, tuple[Lane, ...]]]
    """Still running, with the lanes they hold: the dispatcher follows them."""
    suspects: set[str]
    """Requeued after the server died (not after a drain): each runs alone once, so a job that
    kills the server takes no innocent neighbour's attempts with it."""


async def settle_left_running(
    store: JobStore, executor: Executor, files: JobFiles, lanes: Lanes
) -> LeftRunning:
    # Read before the recovery: a drained job gets its attempt back.
    drained = await anyio.to_thread.run_sync(files.take_abandoned)
    await _complete_claims(store, await anyio.to_thread.run_sync(files.starts.read))
    await anyio.to_thread.run_sync(files.starts.clear)
    running = await store.running()
    by_id = {lane.id: lane for lane in lanes}
    on_lanes = [job for job in running if job.devices and set(job.devices) <= by_id.keys()]
    # Asked even with none: an executor on a cluster lets go of what an earlier server left.
    survivors = await executor.surviving(on_lanes)
    # A stream never ends by itself, and a tune supervises its trials from what the store holds:
    # whatever stopped the server, resuming either is no new attempt.
    resuming = {job.id for job in running if is_stream(job) or KINDS[job.kind].resumes}
    resumed = frozenset(drained) | resuming
    changed = await store.recover(utcnow(), resumed, frozenset(survivors))
    for job in changed:
        log.warning("recovered job %s after a stop: now %s", job.id, job.state)
    surviving = []
    for job in running:
        if job.id in survivors:
            log.warning("job %s still runs on %s: following it", job.id, job.devices)
            surviving.append((job, tuple(by_id[lane_id] for lane_id in job.devices)))
    suspects = {job.id for job in changed if job.state is JobState.QUEUED and job.id not in resumed}
    return LeftRunning(changed, surviving, suspects)


async def _complete_claims(store: JobStore, started: list[Started]) -> None:
    """Claim the jobs whose runs started (`StartJournal`) and are still QUEUED in the attempt
    before the one that run noted: their claims had not committed when the server died. They
    are then RUNNING, as if the claims had landed, and the recovery settles them like the rest
    (an interrupted attempt counted; a suspect)."""
    for entry in started:
        try:
            job = await store.get(entry.job_id)
        except JobNotFound:
            continue
        if job.state is JobState.QUEUED and job.attempt == entry.attempt - 1:
            await store.claim(job.id, entry.devices, utcnow())
