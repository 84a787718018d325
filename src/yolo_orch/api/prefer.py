"""`Prefer: wait=N` (RFC 7240 section 4.3): how long a client would have a request held for the
job it names to finish. Preferences are hints: a malformed or unknown one is ignored, never an
error (the header's length is bounded by `max_header_bytes`, as every header's), and the wait is
capped by `max_wait_s`."""

from __future__ import annotations

import math
from typing import Annotated

from fastapi import Depends, Header, Response

from yolo_orch.api.deps import ServicesDep

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


async def _requested_wait(
    services: ServicesDep,
    prefer: Annotated[
        list[str] | None, Header(alias="Prefer", description=PREFER_DESCRIPTION)
    ] = None,
) -> float | None:
    # Several Prefer fields are one list, as if joined by commas (RFC 7240 section 2).
    return wait_seconds(",".join(prefer or ()), services.settings.max_wait_s)


RequestedWait = Annotated[float | None, Depends(_requested_wait)]


PREFERENCE_APPLIED: dict[str, object] = {
    "description": "`wait=N`: the wait applied (the one asked for, at most `max_wait_s`)",
    "schema": {"type": "string"},
}
"""The response header, as the OpenAPI document declares it."""


def mark_applied(response: Response, seconds: float) -> None:
    response.headers["Preference-Applied"] = f"wait={seconds:g}"
