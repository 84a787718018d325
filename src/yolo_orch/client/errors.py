"""Exit codes of the client commands, and the error every failed request becomes."""

from __future__ import annotations

import enum

from yolo_orch.domain import JobState


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
    def for_state(cls, state: JobState) -> ExitCode:
        """The exit code for a job's state: only `failed` and `cancelled` are not OK."""
        if state is JobState.FAILED:
            return cls.JOB_FAILED
        if state is JobState.CANCELLED:
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


class ClientCode(enum.StrEnum):
    """The codes of the failures the client finds itself, which no server sends (the server's
    are `yolo_orch.errors.ErrorCode`; none has the same value). An error answer without problem
    JSON (a proxy's, say) has the code `http_<status>`."""

    UNREACHABLE = "unreachable"
    """No answer came: the server could not be reached, or did not answer in time."""
    STREAM_ENDED = "stream_ended"
    """A job's event stream ended before the job did, and could not be taken up again."""
    NO_JOB = "no_job"
    """A job's events ended without ever showing the job."""


class ApiError(Exception):
    """A request that did not succeed: a problem answer from the server, or no answer at all.

    `code` is the server's machine code (`job_not_found`, `queue_full`, ...: an `ErrorCode`) or
    one of the client's own (`ClientCode`, `http_<status>`)."""

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
