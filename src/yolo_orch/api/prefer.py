"""`Prefer: wait=N` (RFC 7240 section 4.3): how long a client would have a request held for the
job it names to finish. Preferences are hints: a malformed or unknown one is ignored, never an
error (the header's length is bounded by `max_header_bytes`, as every header's), and the wait is
capped by `max_wait_s`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, Request, Response
from starlette.types import Scope

from yolo_orch.api.connections import released_if_shed
from yolo_orch.api.deps import ServicesDep
from yolo_orch.domain import Job
from yolo_orch.jobs.service import JobService

PREFER_DESCRIPTION = (
    "`wait=N` (RFC 7240): hold the answer up to N seconds (at most `max_wait_s`) until the job "
    "ends. Other preferences are ignored."
)


def wait_seconds(header: str | None, max_wait_s: float) -> float | None:
    """The wait a `Prefer` header asks for, capped; None when it asks for none."""
    if not header or max_wait_s <= 0:
        return None
    for preference in header.split(","):
        name, _, value = preference.split(";", 1)[0].partition("=")
        if name.strip().lower() != "wait":
            continue
        try:
            seconds = float(value.strip().strip('"'))
        except ValueError:
            return None
        if not math.isfinite(seconds) or seconds <= 0:
            return None
        return min(seconds, max_wait_s)
    return None


@dataclass(frozen=True)
class Wait:
    """A wait a request asked for."""

    seconds: float
    scope: Scope
    """The request's: its connection may be shed while it waits."""

    async def until_finished(self, jobs: JobService, job_id: str) -> Job:
        """The job once it ends, or as it is after the wait, or once the server stops or the
        request's connection is shed (`api.connections`)."""
        with released_if_shed(self.scope):
            return await jobs.wait_until_finished(job_id, self.seconds)
        return await jobs.get(job_id)


async def _requested_wait(
    services: ServicesDep,
    request: Request,
    prefer: Annotated[
        list[str] | None, Header(alias="Prefer", description=PREFER_DESCRIPTION)
    ] = None,
) -> Wait | None:
    # Several Prefer fields are one list, as if joined by commas (RFC 7240 section 2).
    seconds = wait_seconds(",".join(prefer or ()), services.settings.max_wait_s)
    return None if seconds is None else Wait(seconds, request.scope)


RequestedWait = Annotated[Wait | None, Depends(_requested_wait)]


PREFERENCE_APPLIED: dict[str, object] = {
    "description": "`wait=N`: the wait applied (the one asked for, at most `max_wait_s`)",
    "schema": {"type": "string"},
}
"""The response header, as the OpenAPI document declares it."""


def mark_applied(response: Response, wait: Wait) -> None:
    response.headers["Preference-Applied"] = f"wait={wait.seconds:g}"
