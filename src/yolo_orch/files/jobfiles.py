"""Each job's folder under `{data_dir}/jobs/{id}`: inputs, artifacts and its result file."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from yolo_orch.files import resultfile
from yolo_orch.files.start_journal import StartJournal

RESULT_FILE = "result.json"
RESULT_INDEX = "result.index"
JOB_LOG = "job.log"
METRICS_FILE = "metrics.json"
"""A training job's per-epoch losses and validation scores, rewritten after each epoch."""
ABANDONED_FILE = ".abandoned-at-drain.json"
STARTS_FILE = ".started.jsonl"
ARTIFACTS_DIR = "artifacts"
FRAMES_SUFFIX = ".frames.jsonl"
"""A video input's per-frame results, `{entry:05d}_{stem}.frames.jsonl`, in its artifacts."""
INPUTS_DIR = "inputs"


class JobFiles:
    def __init__(
        self,
        root: Path,
        max_result_bytes: int = resultfile.DEFAULT_MAX_RESULT_BYTES,
        inline_result_bytes: int = resultfile.DEFAULT_INLINE_RESULT_BYTES,
    ) -> None:
        self.root = root
        self.max_result_bytes = max_result_bytes
        self.inline_result_bytes = min(inline_result_bytes, max_result_bytes)
        self._filling: set[str] = set()
        """Job ids whose folder an upload request is filling and whose job is not committed
        yet: the orphan sweep leaves them be however long the request takes."""
        self._filling_lock = threading.Lock()
        self.starts = StartJournal(root / STARTS_FILE)

    def workdir(self, job_id: str) -> Path:
        return self.root / job_id

    def inputs_dir(self, job_id: str) -> Path:
        return self.workdir(job_id) / INPUTS_DIR

    def save_inputs(
        self, job_id: str, uploads: list[tuple[str, BinaryIO]]
    ) -> tuple[list[dict[str, str]], list[str]]:
        """Store uploaded images in the job's folder before the job is accepted. Blocking; durable
        before it returns (each file and the folder are fsynced), since the job that names them
        is committed before the client's 202. Returns the job's `files` entries and the SHA-256
        of each upload (for idempotency fingerprints)."""
        with self._filling_lock:
            self._filling.add(job_id)  # before the folder exists: the sweep never sees it free
        folder = self.inputs_dir(job_id)
        folder.mkdir(parents=True, exist_ok=True)
        files, digests = [], []
        for index, (name, source) in enumerate(uploads):
            display = Path(name.replace("\\", "/")).name or f"image-{index}"
            target = folder / f"{index:05d}{_stored_suffix(display)}"
            digest = hashlib.sha256()
            with target.open("wb") as out:
                while chunk := source.read(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
                _sync_file(out)
            files.append({"path": str(target.resolve()), "name": display})
            digests.append(digest.hexdigest())
        _sync_dir(folder)
        return files, digests

    def remove(self, job_id: str) -> int:
        """Remove the job's folder; the bytes its files held. Blocking."""
        freed = remove_counting(self.workdir(job_id))
        self.settled(job_id)
        return freed

    def settled(self, job_id: str) -> None:
        """The upload that filled the job's folder is over: its job is committed (the store
        knows the folder now) or its folder removed."""
        with self._filling_lock:
            self._filling.discard(job_id)

    def filling(self) -> frozenset[str]:
        """The job ids whose folder an upload request still holds (`save_inputs` until
        `settled`)."""
        with self._filling_lock:
            return frozenset(self._filling)

    def artifacts(self, job_id: str) -> list[tuple[str, int]]:
        """Names and sizes of the files a job produced, for clients to fetch."""
        folder = self.workdir(job_id) / ARTIFACTS_DIR
        if not folder.is_dir():
            return []
        return sorted(
            (path.name, path.stat().st_size)
            for path in folder.iterdir()
            if path.is_file() and not path.name.startswith(".")
        )

    def artifact_path(self, job_id: str, name: str) -> Path | None:
        if "/" in name or "\\" in name or name.startswith("."):
            return None
        path = self.workdir(job_id) / ARTIFACTS_DIR / name
        return path if path.is_file() else None

    def uploaded_input(self, job_id: str, path: str) -> Path | None:
        """`path` (a job's `files` entry) when it is an image uploaded with that job. Blocking."""
        folder = self.inputs_dir(job_id).resolve()
        candidate = Path(path).resolve()
        if candidate.parent != folder or not candidate.is_file():
            return None
        return candidate

    def note_abandoned(self, job_ids: list[str]) -> None:
        """Which jobs a graceful stop left running: at the next start they are requeued like
        any interrupted job, but they did not crash anything."""
        write_atomic(self.root / ABANDONED_FILE, json.dumps(job_ids).encode())

    def take_abandoned(self) -> set[str]:
        path = self.root / ABANDONED_FILE
        try:
            job_ids = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return set()
        path.unlink(missing_ok=True)
        return set(job_ids) if isinstance(job_ids, list) else set()

    def read_metrics(self, job_id: str) -> bytes:
        path = self.workdir(job_id) / METRICS_FILE
        return path.read_bytes() if path.is_file() else b"[]"

    def read_log(self, job_id: str) -> bytes:
        path = self.workdir(job_id) / JOB_LOG
        return path.read_bytes() if path.is_file() else b""

    def result_path(self, job_id: str) -> Path:
        return self.workdir(job_id) / RESULT_FILE

    def small_result(self, detail: dict[str, Any]) -> bytes | None:
        """No I/O: `detail` as its file would hold it, if that takes at most
        `inline_result_bytes`, to be committed with the job's outcome (it is read in preference
        to any file an earlier attempt left); None for a result that needs its file."""
        return resultfile.encode_small(detail, self.inline_result_bytes)

    def write_result(self, job_id: str, detail: dict[str, Any]) -> None:
        """Blocking; durable before it returns, so a job is only marked succeeded after its
        result file is complete. `ResultTooLarge` past `max_result_bytes` (nothing is left).
        The index is put in place first: `result.json` is what makes the result exist."""
        index_path = self.workdir(job_id) / RESULT_INDEX
        index_path.unlink(missing_ok=True)  # an earlier attempt's
        with _atomic_file(self.result_path(job_id)) as file:
            index = resultfile.write_result(file, detail, self.max_result_bytes)
            if index is not None:
                write_atomic(index_path, index)

    def result_page(self, job_id: str, offset: int, limit: int) -> resultfile.EntryPage:
        """Entries `offset .. offset + limit - 1` of the job's result. Blocking."""
        folder = self.workdir(job_id)
        return resultfile.read_page(folder / RESULT_FILE, folder / RESULT_INDEX, offset, limit)

    def frame_page(
        self, job_id: str, entry: int, offset: int, limit: int
    ) -> resultfile.EntryPage | None:
        """Frames `offset .. offset + limit - 1` of the video at `entry` of the job's result
        (its `{entry:05d}_*.frames.jsonl` artifact); None when that entry has none. Blocking."""
        folder = self.workdir(job_id) / ARTIFACTS_DIR
        found = sorted(folder.glob(f"{entry:05d}_*{FRAMES_SUFFIX}")) if entry >= 0 else []
        if len(found) != 1:
            return None
        frames = found[0]
        index = frames.with_name(f".{frames.name}.index")
        return resultfile.read_page(frames, index, offset, limit, lines=True)


def remove_counting(path: Path) -> int:
    """Remove a file or a folder with everything in it (symlinks are removed, never followed);
    the bytes of the regular files it held. Blocking."""
    freed = 0
    for folder, _, names in os.walk(path):
        for name in names:
            with contextlib.suppress(OSError):
                info = os.lstat(os.path.join(folder, name))
                freed += info.st_size if stat.S_ISREG(info.st_mode) else 0
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            info = path.lstat()
            freed += info.st_size if stat.S_ISREG(info.st_mode) else 0
            path.unlink()
    return freed


def open_to_append(path: Path) -> TextIO:
    """`path` opened to append text, its folder made only if it is not there: one open for a
    job whose folder is there already, rather than a mkdir, a stat and an open."""
    try:
        return path.open("a", encoding="utf-8")
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        return path.open("a", encoding="utf-8")


def write_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write to a temporary name in the same folder, fsync, rename: readers see the old file or
    the whole new one, never a torn one, also after a crash. `durable=False` leaves out the
    fsyncs, for a file rewritten often that only a power cut may cost, not a process that dies
    (the page cache keeps it): a training's per-epoch metrics, no safer then than the `last.pt`
    ultralytics writes beside them, and whole in the job's result once it ends."""
    with _atomic_file(path, durable=durable) as file:
        file.write(data)


@contextmanager
def _atomic_file(path: Path, *, durable: bool = True) -> Iterator[BinaryIO]:
    """A file to write that replaces `path` (fsynced unless not `durable`, renamed) once the
    block ends without an exception; on an exception nothing of it is left."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            yield file
            if durable:
                _sync_file(file)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        _sync_dir(path.parent)


def _sync_file(file: BinaryIO) -> None:
    """Flush `file` and fsync it: its data is on disk once this returns."""
    file.flush()
    os.fsync(file.fileno())


def _sync_dir(folder: Path) -> None:
    """fsync a folder, so that the names created or renamed in it survive a crash."""
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _stored_suffix(display: str) -> str:
    """The extension an upload is stored with (readers pick images from videos by it): the
    client's, lower-cased, when it is a plain one; none otherwise (a NUL, a path, 40 bytes)."""
    suffix = Path(display).suffix.lower()
    return suffix if re.fullmatch(r"\.[a-z0-9]{1,9}", suffix) else ""
