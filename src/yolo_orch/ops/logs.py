"""Logging: one line per request and per job transition, as text or JSON, and each job's own log
file (`{data_dir}/jobs/{id}/job.log`, served at GET /v1/jobs/{id}/logs).

A job's lines are found by the `job_id` a record carries (`extra={"job_id": ...}`) or by the job
whose run is in progress in the current context: the dispatcher sets it before a run, and worker
threads inherit it, so whatever a runner logs (ultralytics included) lands in its job's file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import logging.handlers
import queue
import re
import threading
import warnings
from collections import OrderedDict, deque
from collections.abc import Iterator
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO, cast

from yolo_orch.files.jobfiles import JOB_LOG, open_to_append

current_job: ContextVar[str | None] = ContextVar("current_job", default=None)


def for_job(job_id: str) -> dict[str, str]:
    """`extra=` for a line about one job, filed in its log whatever `current_job` says (a
    batch's task and thread run in its first job's context)."""
    return {"job_id": job_id}


_HELD = "job_log_held"
_STANDARD_ATTRS = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "color_message",
    _HELD,
}


def before_start(job_id: str) -> dict[str, object]:
    """`extra` for a record about a job that has not started (its submission): its job log
    holds the line in memory until the job's file is opened (when the job starts, or is
    cancelled), so a submission makes no folder and opens no file."""
    return {"job_id": job_id, _HELD: True}


def configure_logging(level: str, json_lines: bool) -> None:
    """Process-wide; called once by the command line. `level` filters the console only: job
    log files always get INFO and above."""
    handler = logging.StreamHandler()
    handler.setLevel(level.upper())
    handler.setFormatter(
        JsonFormatter()
        if json_lines
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(min(handler.level, logging.INFO))
    # Alembic announces its plugins at import and its context at every readiness check.
    for chatty in ("alembic.runtime.plugins", "alembic.runtime.migration"):
        logging.getLogger(chatty).setLevel(logging.WARNING)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        job_id = getattr(record, "job_id", None) or current_job.get()
        if job_id:
            line["job_id"] = job_id
        line.update(
            (key, value) for key, value in record.__dict__.items() if key not in _STANDARD_ATTRS
        )
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


class JobLogHandler(logging.Handler):
    """Appends each record that belongs to a job to that job's log file, on the thread of
    `JobLogs` (never the event loop's), as a person reads it (`readable`): whatever logged it,
    ultralytics included, the one place every job's lines pass.

    The files of the most recently active jobs stay open (a write, not a mkdir and an open, per
    line), and lines logged with `before_start` wait in memory for the job's first other line
    (the oldest `HELD_JOBS` jobs' are dropped: jobs that never start).
    """

    OPEN_FILES = 32
    HELD_JOBS = 10_000

    def __init__(self, jobs_dir: Path) -> None:
        super().__init__(logging.INFO)
        self._jobs_dir = jobs_dir
        self._files: OrderedDict[str, TextIO] = OrderedDict()
        self._held: OrderedDict[str, list[str]] = OrderedDict()
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        job_id = getattr(record, "job_id", None) or current_job.get()
        if not job_id:
            return
        try:
            message = readable(record.getMessage())
            if not message:
                return
            line = self.format(_with_message(record, message)) + "\n"
            with self.lock or contextlib.nullcontext():
                if getattr(record, _HELD, False) and job_id not in self._files:
                    self._hold(job_id, line)
                    return
                self._file(job_id).write(line)
        except Exception:
            self.handleError(record)

    def flush(self) -> None:
        """Called by `JobLogs`' thread once it has written what it took from the queue. A file
        that cannot be written (a full disk) loses its lines, as a failed `emit` would: the
        thread must go on, or every `settle` would wait for it forever."""
        with self.lock or contextlib.nullcontext():
            for file in self._files.values():
                with contextlib.suppress(OSError, ValueError):
                    file.flush()

    def close(self) -> None:
        with self.lock or contextlib.nullcontext():
            while self._files:
                with contextlib.suppress(OSError):  # its last lines are lost, as in `flush`
                    self._files.popitem()[1].close()
            self._held.clear()
        super().close()

    def _file(self, job_id: str) -> TextIO:
        file = self._files.get(job_id)
        if file is None:
            file = self._files[job_id] = open_to_append(self._jobs_dir / job_id / JOB_LOG)
            file.writelines(self._held.pop(job_id, ()))
            if len(self._files) > self.OPEN_FILES:
                self._files.popitem(last=False)[1].close()
        self._files.move_to_end(job_id)
        return file

    def _hold(self, job_id: str, line: str) -> None:
        self._held.setdefault(job_id, []).append(line)
        self._held.move_to_end(job_id)
        if len(self._held) > self.HELD_JOBS:
            self._held.popitem(last=False)


_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
"""Terminal escapes: colours and styles (CSI), titles and links (OSC), the rest of ECMA-48's."""
_NOISE = re.compile(
    r"\s*(?:(?:Predict|Validate|Visualize):\s.*"  # the command lines and URL after an export
    r"|Ultralytics \d+\.\d+\.\d+ \S* ?Python-.*)"  # the banner: versions and the device
)
"""Lines of ultralytics' that are meant for a terminal: what to type next, where to look."""


def readable(message: str) -> str:
    """A library's message as a job's log keeps it: no terminal escapes, none of the lines
    `_NOISE` matches, no blank lines around it ("" when nothing is left)."""
    lines = _ANSI.sub("", message).splitlines()
    return "\n".join(line for line in lines if not _NOISE.fullmatch(line)).strip("\n")


def _with_message(record: logging.LogRecord, message: str) -> logging.LogRecord:
    """`record` with its message replaced, copied: the console's handler formats the same
    record."""
    if message == record.getMessage():
        return record
    copy = logging.makeLogRecord(record.__dict__)
    copy.msg, copy.args = message, None
    return copy


class _JobRecords(logging.handlers.QueueHandler):
    """Queues the records that belong to a job, each marked with its job: the job is found
    here, in the context that logged it."""

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "job_id", None) or current_job.get():
            super().emit(record)

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        """The record itself, marked, where `QueueHandler.prepare` formats a copy: the queue
        stays in this process, and the logging thread is done with the record once this
        handler, installed after the console's, has queued it. Formatting waits for the job
        log thread, off the event loop."""
        record.job_id = getattr(record, "job_id", None) or current_job.get()
        return record


class JobLogs:
    """Each job's log file, written by a thread of its own (a standard library queue listener):
    a job's first line opens its file, which must not happen on the event loop, where the
    dispatcher logs a job's start and end. A process killed outright loses the lines still
    queued (`BATCH_S`' worth), as it would lose those in an unflushed buffer."""

    def __init__(self, jobs_dir: Path) -> None:
        self._queue: queue.SimpleQueue[_Queued] = queue.SimpleQueue()
        self.writer = JobLogHandler(jobs_dir)
        self.records = _JobRecords(self._queue)
        self.records.setLevel(logging.INFO)
        self._listener = _BatchingListener(self._queue, self.writer)

    def settle(self) -> None:
        """Blocking: every line logged so far is in its file."""
        self._listener.settle()

    def start(self) -> None:
        self._listener.start()

    def stop(self) -> None:
        self._listener.stop()  # writes what is queued first
        self.writer.close()


BATCH_S = 0.02
"""How long the job log thread, woken by a line, waits for more before it writes them. A thread
woken for each line takes the GIL from the event loop and the store's writer twice per job (its
start and its end); one woken per batch costs a stream of jobs at most 50 wake-ups a second."""

_Queued = logging.LogRecord | threading.Event | None
"""A record, a `settle` waiting for the records before it, or the listener's stop."""


class _BatchingListener(logging.handlers.QueueListener):
    """A queue listener that takes what was queued in batches, through `dequeue`, its documented
    extension point, and flushes the job files once per batch rather than once per line."""

    def __init__(self, records: queue.SimpleQueue[_Queued], writer: JobLogHandler) -> None:
        super().__init__(records, writer, respect_handler_level=True)
        self._records = records
        self._writer = writer
        self._taken: deque[_Queued] = deque()
        self._hurry = threading.Event()
        """Set by `settle` and `stop`: the batch being gathered is written at once."""

    def settle(self) -> None:
        done = threading.Event()
        self._records.put_nowait(done)
        self._hurry.set()  # after the put: the batch it ends is sure to hold it
        done.wait()

    def enqueue_sentinel(self) -> None:
        super().enqueue_sentinel()
        self._hurry.set()

    def dequeue(self, block: bool) -> logging.LogRecord:
        while True:
            if not self._taken:
                self._writer.flush()  # every record taken so far was handled
                self._taken.append(self._records.get(block))
                self._hurry.wait(BATCH_S)
                self._hurry.clear()
                with contextlib.suppress(queue.Empty):
                    while True:
                        self._taken.append(self._records.get_nowait())
            taken = self._taken.popleft()
            if not isinstance(taken, threading.Event):
                # A record, or None: the stop, which the listener looks for (typeshed's
                # signature leaves it out).
                return cast(logging.LogRecord, taken)
            self._writer.flush()
            taken.set()


def install_job_logs(jobs_dir: Path) -> JobLogs:
    """Attach the job logs to the root logger and to ultralytics' own (which does not
    propagate); `remove_job_logs` detaches them."""
    logs = JobLogs(jobs_dir)
    logs.start()
    for name in ("", "ultralytics"):
        logging.getLogger(name).addHandler(logs.records)
    ours = logging.getLogger("yolo_orch")
    if ours.getEffectiveLevel() > logging.INFO:
        ours.setLevel(logging.INFO)
    return logs


def remove_job_logs(logs: JobLogs) -> None:
    for name in ("", "ultralytics"):
        logging.getLogger(name).removeHandler(logs.records)
    logs.stop()


_info_lock = threading.Lock()
_info_users = 0
_quiet_level = logging.NOTSET


@contextlib.contextmanager
def ultralytics_info_to_job_logs() -> Iterator[None]:
    """Let ultralytics' INFO records (an exporter's progress) reach job logs while the block runs.

    ultralytics runs quiet (`YOLO_VERBOSE=False` sets its logger and its console handler to
    ERROR). Lowering the logger alone passes INFO on to the job log handler, while its console
    handler keeps ERROR; blocks in several threads share one lowering, undone by the last.
    """
    global _info_users, _quiet_level
    logger = logging.getLogger("ultralytics")
    with _info_lock:
        if _info_users == 0:
            _quiet_level = logger.level
            logger.setLevel(min(logger.level or logging.INFO, logging.INFO))
        _info_users += 1
    try:
        yield
    finally:
        with _info_lock:
            _info_users -= 1
            if _info_users == 0:
                logger.setLevel(_quiet_level)


_warnings_lock = threading.Lock()
_warnings_users = 0
_saved_warnings: tuple[list[Any], Any] | None = None
_warnings_log = logging.getLogger("py.warnings")


@contextlib.contextmanager
def warnings_to_job_logs() -> Iterator[None]:
    """While the block runs, every warning is logged (into the job log of the thread that
    raised it) instead of printed, or raised where warnings are errors.

    For library code whose deprecation notices are not the job's fault (ultralytics' exporters
    call what torch has deprecated). The warnings machinery is process-wide, so blocks in several
    threads share one set-up, undone by the last; `warnings.catch_warnings` would not nest across
    threads.
    """
    global _warnings_users, _saved_warnings
    with _warnings_lock:
        if _warnings_users == 0:
            _saved_warnings = (list(warnings.filters), warnings.showwarning)
            warnings.simplefilter("always")
            warnings.showwarning = _log_warning
        _warnings_users += 1
    try:
        yield
    finally:
        with _warnings_lock:
            _warnings_users -= 1
            if _warnings_users == 0 and _saved_warnings is not None:
                filters, showwarning = _saved_warnings
                cast(list[Any], warnings.filters)[:] = filters
                warnings.showwarning = showwarning
                warnings._filters_mutated()  # type: ignore[attr-defined]


def _log_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    _warnings_log.warning("%s: %s (%s:%d)", category.__name__, message, filename, lineno)
