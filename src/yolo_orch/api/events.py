"""GET /v1/events: every job's changes on one server-sent event stream (the dashboard's feed)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header
from fastapi.sse import EventSourceResponse, ServerSentEvent

from yolo_orch.api.deps import ServicesDep
from yolo_orch.api.schemas import JobPublic
from yolo_orch.errors import JobNotFound

router = APIRouter(prefix="/v1/events", tags=["jobs"])

_STREAM_SCHEMA: dict[str, Any] = {
    "itemSchema": {
        "properties": {
            "data": {"contentMediaType": "application/json"},
            "event": {"enum": ["ready", "job", "deleted", "resync"]},
        },
        "required": ["data", "event", "id"],
    }
}


@router.get(
    "",
    summary="Follow every job: server-sent events",
    description="`text/event-stream`. `event: ready` first (data: `{}`), then `event: job` with "
    "the job as GET /v1/jobs/{id} returns it each time one changes (state or progress; changes "
    "that come faster than the client reads are merged, the latest kept), and `event: deleted` "
    '(data: `{"id"}`) when one is deleted. With `Last-Event-ID`, the stream resumes after that '
    "event; when the server no longer has it (restarted, or too many changes since), it sends "
    "`event: resync` first: read GET /v1/jobs again. A comment is sent every 15 s of quiet.",
    response_class=EventSourceResponse,
    responses={200: {"content": {"text/event-stream": _STREAM_SCHEMA}}},
)
async def all_events(
    services: ServicesDep,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=32)] = None,
) -> AsyncIterator[ServerSentEvent]:
    events = services.events
    seen = events.latest
    if last_event_id is not None and last_event_id.isdigit():
        resumed = int(last_event_id)
        if events.changed_since(resumed) is None:
            yield ServerSentEvent(id=str(seen), event="resync", data={})
        else:
            seen = resumed
    else:
        yield ServerSentEvent(id=str(seen), event="ready", data={})
    while True:
        await events.wait_for_any(seen)
        latest = events.latest
        changed = events.changed_since(seen)
        seen = latest
        if changed is None:  # this client fell behind the log
            yield ServerSentEvent(id=str(seen), event="resync", data={})
            continue
        for job_id in changed:
            try:
                job = await services.jobs.get(job_id)
            except JobNotFound:
                yield ServerSentEvent(id=str(seen), event="deleted", data={"id": job_id})
                continue
            yield ServerSentEvent(id=str(seen), event="job", data=JobPublic.of(job))
