"""How a run's exception reads as a job's error: by what torch and the OS say, since runners
raise what their libraries raise."""

from __future__ import annotations

import errno

from yolo_orch.domain import JobError
from yolo_orch.errors import ErrorCode, YoloOrchError

_STICKY_CUDA_ERRORS = (
    "illegal memory access",
    "device-side assert",
    "unspecified launch failure",
    "misaligned address",
    "illegal instruction",
    "uncorrectable ECC error",
    "CUDA error: unknown error",
)
"""CUDA errors after which the process's CUDA context is unusable until the process ends."""


def failure_of(exc: BaseException) -> JobError:
    """Classify what a runner raised by what torch says: CUDA OOM is a RuntimeError saying "out
    of memory"; sticky CUDA errors name their cause. The simulated runtime raises the same."""
    if isinstance(exc, YoloOrchError):
        return JobError(exc.code, exc.message)
    if disk_full(exc):
        return JobError(ErrorCode.DISK_FULL, f"no space left on the device: {exc}")
    if isinstance(exc, RuntimeError) and any(sign in str(exc) for sign in _STICKY_CUDA_ERRORS):
        return JobError(ErrorCode.CUDA_FATAL, str(exc))
    if isinstance(exc, RuntimeError) and "out of memory" in str(exc):
        return JobError(ErrorCode.CUDA_OOM, str(exc))
    return JobError(ErrorCode.RUNTIME_ERROR, f"{type(exc).__name__}: {exc}")


def disk_full(exc: BaseException | None) -> bool:
    """ENOSPC, raised directly or as the cause of what a library raised instead (torch's
    checkpoint writer, for one, says so only in its message)."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            return True
        if "No space left on device" in str(exc):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False
