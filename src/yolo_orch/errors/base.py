"""The root of the error family."""

from __future__ import annotations

from yolo_orch.errors.codes import ErrorCode


class YoloOrchError(Exception):
    code: ErrorCode
    """Each subclass names its own."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
