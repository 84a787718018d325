"""Each job's folder under `{data_dir}/jobs/{id}`: inputs, artifacts and its result file."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

RESULT_FILE = "result.json"


class JobFiles:
    def __init__(self, root: Path) -> None:
        self.root = root

    def workdir(self, job_id: str) -> Path:
        return self.root / job_id

    def result_path(self, job_id: str) -> Path:
        return self.workdir(job_id) / RESULT_FILE

    def write_result(self, job_id: str, detail: dict[str, Any]) -> None:
        """Blocking; durable before it returns, so a job is only marked succeeded after its
        result file is complete."""
        write_atomic(self.result_path(job_id), json.dumps(detail).encode())

    def read_result(self, job_id: str) -> bytes:
        return self.result_path(job_id).read_bytes()


def write_atomic(path: Path, data: bytes) -> None:
    """Write to a temporary name in the same folder, fsync, rename: readers see the old file or
    the whole new one, never a torn one, also after a crash."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
