"""How a runner's exception becomes a job's error code."""

from __future__ import annotations

import pytest

from yolo_orch.errors import InvalidJobInput, ModelTampered
from yolo_orch.runners.failures import failure_of


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB"), "cuda_oom"),
        (RuntimeError("CUDA out of memory: ..."), "cuda_oom"),
        (RuntimeError("CUDA error: an illegal memory access was encountered"), "cuda_fatal"),
        (RuntimeError("CUDA error: device-side assert triggered"), "cuda_fatal"),
        (RuntimeError("CUDA error: unspecified launch failure"), "cuda_fatal"),
        (RuntimeError("CUDA error: uncorrectable ECC error encountered"), "cuda_fatal"),
        (RuntimeError("shape mismatch"), "runtime_error"),
        (ValueError("bad value"), "runtime_error"),
        (InvalidJobInput("no such image"), "invalid_input"),
    ],
)
def test_exceptions_map_to_error_codes(exc: Exception, code: str) -> None:
    assert failure_of(exc).code == code


def test_own_errors_keep_their_code_and_message() -> None:
    from pathlib import Path

    error = failure_of(ModelTampered(Path("m.pt"), "a" * 64, "b" * 64))
    assert error.code == "model_tampered"
    assert "changed since it was imported" in error.message
