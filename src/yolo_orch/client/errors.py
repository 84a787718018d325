"""Exit codes of the client commands, and the error every failed request becomes."""

from __future__ import annotations

import enum

# The job states the server never leaves; a job in one of them has ended.
TERMINAL_STATES = frozenset({"succeeded", "failed", "cancelled"})


class ExitCode(enum.IntEnum):
    """What `yolo-orch` exits with. Scripts may rely on these numbers."""

    OK = 0
    JOB_FAILED = 1
    JOB_CANCELLED = 2
    USAGE = 3
    NOT_FOUND = 4
    UNAVAILABLE = 5
    AUTH = 6

    @property
    def description(self) -> str:
        return _DESCRIPTIONS[self]

    @classmethod
    def for_status(cls, status: int) -> ExitCode:
        """The exit code for an HTTP error status."""
        if status in (401, 403):
            return cls.AUTH
        if status == 404:
            return cls.NOT_FOUND
        if status in (429, 503) or status >= 500:
            return cls.UNAVAILABLE
        return cls.USAGE

    @classmethod
    def for_state(cls, state: str) -> ExitCode:
        """The exit code for a job's state: only `failed` and `cancelled` are not OK."""
        if state == "failed":
            return cls.JOB_FAILED
        if state == "cancelled":
            return cls.JOB_CANCELLED
        return cls.OK


_DESCRIPTIONS = {
    ExitCode.OK: "success",
    ExitCode.JOB_FAILED: "the job failed (wait, status, submit/validate/export --wait)",
    ExitCode.JOB_CANCELLED: "the job was cancelled (wait, status, submit/validate/export --wait)",
    ExitCode.USAGE: "bad command line, or input the server refused (any other 4xx)",
    ExitCode.NOT_FOUND: "no such job, model or route (404)",
    ExitCode.UNAVAILABLE: "server busy, draining or unreachable (429, 503, 5xx, no connection)",
    ExitCode.AUTH: "missing, wrong or insufficient token (401, 403)",
}


def exit_codes_help() -> str:
    """The exit codes, one per line, for `--help`."""
    return "\n".join(f"{code.value}  {code.description}" for code in ExitCode)


class ApiError(Exception):
    """A request that did not succeed: a problem answer from the server, or no answer at all.

    `code` is the server's machine code (`job_not_found`, `queue_full`, ...) or, when the server
    could not be reached, `unreachable`."""

    def __init__(
        self, detail: str, code: str, exit_code: ExitCode, status: int | None = None
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.code = code
        self.exit_code = exit_code
        self.status = status

    def __str__(self) -> str:
        return f"{self.detail} ({self.code})"
