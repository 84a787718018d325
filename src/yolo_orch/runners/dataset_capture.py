"""Capture (`params.capture`): the images of inference and stream jobs that their rule selects,
stored with the model's predictions as YOLO labels into a managed dataset.

The lane's thread only decides: `JobCapture.offer` runs the rule and the caps
(`labelling.capture_rule`) on the image's result entry and puts the entry and its pixels on a
bounded queue without waiting; a full queue drops the image (counted). One writer thread per
server (`CaptureWriter`) turns each entry into label lines (`labelling.yolo_labels`), encodes the
pixels as JPEG and adds the item (`source: "model"`). A job's summary says what came of its
images: `capture: {selected, captured, capped, dropped}`.

Capture runs on this server's lanes only: a Ray node has no writer (submission refuses capture
on Ray lanes; a job that reaches a node with it fails `invalid_input`)."""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from yolo_orch.domain import Job, JsonObject
from yolo_orch.domain.managed_datasets import DatasetInfo
from yolo_orch.errors import InvalidJobInput
from yolo_orch.labelling.capture_rule import CaptureCaps, CaptureRule
from yolo_orch.labelling.yolo_labels import label_lines
from yolo_orch.ops.logs import for_job
from yolo_orch.params.capture import CaptureParams

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Pixels = NDArray[np.uint8]

__all__ = ["CaptureTarget", "CaptureWriter", "JobCapture", "job_capture"]

log = logging.getLogger(__name__)

QUEUE_SIZE = 32
"""Images waiting for the writer, at most (over all jobs): 32 1080p frames are ~200 MB."""
SUMMARY_WAIT_S = 10.0
"""How long a finished job waits for its queued images to be written, so its summary counts
them; what is still queued then is written after, and counted `captured` nowhere."""
JPEG_QUALITY = 95
WRITER_NICE = 10
"""How much less CPU the writer thread gets than the lanes' threads (Linux gives each thread
its own nice value): what capture costs is taken from idle time first."""


class CaptureTarget(Protocol):
    """What capture needs of the managed datasets (`files.managed_datasets.ManagedDatasets`)."""

    def get(self, name: str) -> DatasetInfo: ...

    def add(
        self,
        name: str,
        image: bytes,
        suffix: str,
        labels: Sequence[str],
        *,
        source: str,
        model_id: str | None = None,
        job_id: str | None = None,
    ) -> str: ...


@dataclass(frozen=True)
class _Item:
    job: JobCapture
    entry: Mapping[str, Any]
    image: Pixels | Callable[[], bytes]
    """BGR pixels the writer encodes, or (the simulated runtime) a call that makes the JPEG."""


class CaptureWriter:
    """The server's queue of captured images and the one thread that writes them."""

    def __init__(
        self,
        datasets: CaptureTarget,
        queue_size: int = QUEUE_SIZE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._datasets = datasets
        self._queue: queue.Queue[_Item | None] = queue.Queue(queue_size)
        self._clock = clock
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="dataset-capture", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = SUMMARY_WAIT_S) -> None:
        """Write what is queued, then end the thread (waiting `timeout_s` at most: a thread
        still writing then is left to the process's exit)."""
        if self._thread is None:
            return
        try:
            self._queue.put(None, timeout=timeout_s)
        except queue.Full:
            unwritten = self._queue.qsize()
            log.warning("dataset capture: the writer is stuck; %d images unwritten", unwritten)
        self._thread.join(timeout_s)

    def for_job(self, job: Job, params: CaptureParams) -> JobCapture:
        """A job's capture into `params.into` (read now: a job whose dataset is gone fails
        `invalid_input`). Its entries are the dataset's task's (submission checked the
        model's)."""
        try:
            info = self._datasets.get(params.into)
        except Exception as e:
            raise InvalidJobInput(f"capture: {e}") from None
        model_id = job.model_id or job.model
        return JobCapture(self._offer, info, params, job.id, model_id, self._clock)

    def _offer(self, item: _Item) -> bool:
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            return False
        return True

    def _run(self) -> None:
        if sys.platform == "linux":
            with contextlib.suppress(OSError):
                thread = threading.get_native_id()
                os.setpriority(
                    os.PRIO_PROCESS, thread, os.getpriority(os.PRIO_PROCESS, thread) + WRITER_NICE
                )
        while (item := self._queue.get()) is not None:
            item.job.written(self._write(item))

    def _write(self, item: _Item) -> bool:
        job, info = item.job, item.job.info
        try:
            lines = label_lines(job.task, item.entry, info.names, info.kpt_shape)
            image = item.image() if callable(item.image) else _jpeg(item.image)
            self._datasets.add(
                info.name,
                image,
                ".jpg",
                lines,
                source="model",
                model_id=str(item.entry.get("model_id") or job.model_id),
                job_id=job.job_id,
            )
        except Exception as e:  # this image's own (a class the dataset lacks, a full disk)
            log.warning(
                "job %s: an image was not captured into %r: %s",
                job.job_id,
                info.name,
                e,
                extra=for_job(job.job_id),
            )
            return False
        return True


def _jpeg(pixels: Pixels) -> bytes:
    import cv2

    ok, encoded = cv2.imencode(".jpg", pixels, [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
    if not ok:
        raise ValueError("the image could not be encoded as JPEG")
    return bytes(encoded.tobytes())


class JobCapture:
    """One job's capture: `offer` from the thread that has the job's results (one at a time),
    `written` from the writer's, `summary` once the job is done."""

    def __init__(
        self,
        offer: Callable[[_Item], bool],
        info: DatasetInfo,
        params: CaptureParams,
        job_id: str,
        model_id: str,
        clock: Callable[[], float],
    ) -> None:
        self._offer = offer
        self.info = info
        self.task = info.task
        self.job_id = job_id
        self.model_id = model_id
        self._rule = CaptureRule(params.when, self.task)
        self._caps = CaptureCaps(params.max_total, params.max_per_hour, clock)
        self.selected = 0
        self.capped = 0
        self._refused = 0
        """Images the full queue refused."""
        self._done = threading.Condition()
        self._queued = 0
        self._captured = 0
        self._failed = 0

    def offer(
        self, entry: Mapping[str, Any], image: Pixels | Callable[[], bytes], number: int
    ) -> None:
        """The image whose result is `entry`: captured when the rule selects it and the caps
        allow, unless the queue is full. `number`: its place among the job's images (a stream's:
        among its source's frames), from 1. Never waits."""
        if not self._rule.selects(entry, number):
            return
        self.selected += 1
        if not self._caps.allows():
            self.capped += 1
            return
        with self._done:
            self._queued += 1
        if self._offer(_Item(self, entry, image)):
            self._caps.took()
            return
        self._refused += 1
        with self._done:
            self._queued -= 1

    def written(self, ok: bool) -> None:
        with self._done:
            if ok:
                self._captured += 1
            else:
                self._failed += 1
            self._done.notify_all()

    def summary(self, wait_s: float = SUMMARY_WAIT_S) -> JsonObject:
        """`selected`: images the rule chose; `captured`: stored in the dataset; `capped`: past
        `max_total` or `max_per_hour`; `dropped`: the queue was full, or writing failed. Waits
        up to `wait_s` for the images still queued."""
        with self._done:
            self._done.wait_for(lambda: self._captured + self._failed >= self._queued, wait_s)
            return {
                "selected": self.selected,
                "captured": self._captured,
                "capped": self.capped,
                "dropped": self._refused + self._failed,
            }


def job_capture(
    writer: CaptureWriter | None, job: Job, params: CaptureParams | None
) -> JobCapture | None:
    """The job's capture, None without `params.capture`; refused where no writer runs."""
    if params is None:
        return None
    if writer is None:
        raise InvalidJobInput(
            "capture runs on the server's own lanes (the thread executor), not here"
        )
    return writer.for_job(job, params)
