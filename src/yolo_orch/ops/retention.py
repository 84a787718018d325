"""What the server forgets on its own: finished jobs past `retention_days` or beyond
`max_finished_jobs`, upload folders whose job was never committed, and temporary files a crash
left behind.

Every pass works in small batches: each batch is one short store write, and its files are
removed in a worker thread, so neither the event loop nor the dispatcher's writes wait for a
long history to go. A job's folder is removed only after its record, so a job can never be
listed without its files; a crash in between leaves an orphaned folder, which the sweep finds.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import anyio
import anyio.to_thread

from yolo_orch.domain import Job
from yolo_orch.files.jobfiles import JobFiles, remove_counting
from yolo_orch.ops.clock import utcnow
from yolo_orch.store.base import JobStore

log = logging.getLogger(__name__)

BATCH_JOBS = 100
"""Jobs forgotten per store write."""
SWEEP_BATCH = 500
"""Job folders looked up per store read."""

STAGING_PREFIX = ".incoming-"
"""The registry's staging names (a weights file, or a variant's folder) under `models_dir`."""
TEMP_SUFFIX = ".tmp"
"""The names atomic writes use until their rename (`jobfiles.write_atomic`): `.NAME.XXXX.tmp`."""

Removed = Callable[[str, int, int], None]
"""Told (reason, jobs, bytes) of each removal: `deleted`, `expired`, `orphaned`, `temporary`."""


@dataclass(frozen=True)
class RetentionRules:
    retention_days: float | None
    max_finished_jobs: int | None
    grace_s: float
    """How old an orphaned folder or a temporary file must be before it is swept: an upload
    still in progress, or an atomic write, is younger."""


class Retention:
    def __init__(
        self,
        store: JobStore,
        files: JobFiles,
        models_dir: Path,
        rules: RetentionRules,
        *,
        limiter: anyio.CapacityLimiter,
        on_removed: Removed | None = None,
        settle_logs: Callable[[], None] = lambda: None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._store = store
        self._files = files
        self._models_dir = models_dir
        self._rules = rules
        self._limiter = limiter
        self._on_removed = on_removed
        self._settle_logs = settle_logs
        """Blocking: the job log lines still queued are written, so none makes a removed
        folder again."""
        self._clock = clock

    async def delete(self, job_id: str) -> Job:
        """Forget a finished job (`JobActive` while it is queued or running) and its files."""
        job = await self._store.delete(job_id)
        freed = await self._remove_folders([job.id])
        self._count("deleted", 1, freed)
        # Not logged with the job's id: the job log handler would make its folder again.
        log.info("job %s deleted (%d bytes freed)", job.id, freed)
        return job

    async def expire(self) -> tuple[int, int]:
        """Forget every finished job the rules say is due, a batch at a time; (jobs, bytes)."""
        rules = self._rules
        if rules.retention_days is None and rules.max_finished_jobs is None:
            return 0, 0
        before = None
        if rules.retention_days is not None:
            before = self._clock() - timedelta(days=rules.retention_days)
        jobs = freed = 0
        while True:
            batch = await self._store.expire(
                finished_before=before, keep=rules.max_finished_jobs, limit=BATCH_JOBS
            )
            if not batch:
                break
            batch_freed = await self._remove_folders([job.id for job in batch])
            self._count("expired", len(batch), batch_freed)
            jobs, freed = jobs + len(batch), freed + batch_freed
            if len(batch) < BATCH_JOBS:
                break
        if jobs:
            log.info("retention: %d finished job(s) expired, %d bytes freed", jobs, freed)
        return jobs, freed

    async def sweep(self) -> tuple[int, int]:
        """Remove orphaned job folders and stale temporary files older than the grace period;
        (entries, bytes). A folder an upload request is still filling is never an orphan, however
        old: its job is committed when the request gets that far."""
        cutoff = time.time() - self._rules.grace_s
        folders = await anyio.to_thread.run_sync(
            _old_job_folders, self._files.root, cutoff, limiter=self._limiter
        )
        orphans: list[str] = []
        for start in range(0, len(folders), SWEEP_BATCH):
            batch = folders[start : start + SWEEP_BATCH]
            # Read before the store: an upload that commits its job after this was held in it,
            # and one that committed before is known to the store's answer.
            filling = self._files.filling()
            orphans.extend(sorted(set(await self._store.unknown(batch)) - filling))
        freed = await self._remove_folders(orphans)
        self._count("orphaned", 0, freed)
        stale = await anyio.to_thread.run_sync(
            _stale_temporaries, [self._files.root, self._models_dir], cutoff, limiter=self._limiter
        )
        stale_freed = await anyio.to_thread.run_sync(_remove_all, stale, limiter=self._limiter)
        self._count("temporary", 0, stale_freed)
        if orphans or stale:
            log.info(
                "swept %d orphaned job folder(s) and %d stale temporary file(s): %d bytes",
                len(orphans),
                len(stale),
                freed + stale_freed,
            )
        return len(orphans) + len(stale), freed + stale_freed

    async def run(self, interval_s: float) -> None:
        """Sweep and expire now, then every `interval_s`; a failed pass is retried next time."""
        while True:
            try:
                await self.sweep()
                await self.expire()
            except Exception:
                log.exception("retention pass failed; retrying in %g s", interval_s)
            await asyncio.sleep(interval_s)

    async def _remove_folders(self, job_ids: list[str]) -> int:
        if not job_ids:
            return 0
        folders = [self._files.workdir(job_id) for job_id in job_ids]

        def remove() -> int:
            self._settle_logs()
            return _remove_all(folders)

        return await anyio.to_thread.run_sync(remove, limiter=self._limiter)

    def _count(self, reason: str, jobs: int, freed: int) -> None:
        if self._on_removed is not None and (jobs or freed):
            self._on_removed(reason, jobs, freed)


def _remove_all(paths: list[Path]) -> int:
    return sum(remove_counting(path) for path in paths)


def _old_job_folders(root: Path, cutoff: float) -> list[str]:
    """The names of the job folders last changed before `cutoff`."""
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return []
    return [
        entry.name
        for entry in entries
        if not entry.name.startswith(".") and _older(entry, cutoff, folder=True)
    ]


def _stale_temporaries(roots: list[Path], cutoff: float) -> list[Path]:
    """Atomic writes' temporary files and the registry's staging entries older than `cutoff`."""
    found: list[Path] = []
    for root in roots:
        for folder, dirs, names in os.walk(root):
            staged = [name for name in dirs if name.startswith(STAGING_PREFIX)]
            dirs[:] = [name for name in dirs if name not in staged]
            for name in staged + names:
                path = Path(folder) / name
                temporary = name.startswith(STAGING_PREFIX) or (
                    name.startswith(".") and name.endswith(TEMP_SUFFIX)
                )
                if temporary and _older_path(path, cutoff):
                    found.append(path)
    return found


def _older(entry: os.DirEntry[str], cutoff: float, *, folder: bool) -> bool:
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:
        return False
    return (stat.S_ISDIR(info.st_mode) == folder) and info.st_mtime < cutoff


def _older_path(path: Path, cutoff: float) -> bool:
    try:
        return path.lstat().st_mtime < cutoff
    except OSError:
        return False
