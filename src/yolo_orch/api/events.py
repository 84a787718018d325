"""GET /v1/events: every job's changes on one server-sent event stream (the dashboard's feed);
and `EndStreamsOnStop`, which ends every event stream cleanly when the server stops."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import ExitStack
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Header
from fastapi.sse import EventSourceResponse, ServerSentEvent
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from yolo_orch.api.connections import SHED_EXTENSION
from yolo_orch.api.deps import ServicesDep
from yolo_orch.api.schemas import JobPublic
from yolo_orch.errors import JobNotFound
from yolo_orch.jobs.notifications import JobEvents
from yolo_orch.ops.stop_signal import StopSignal

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
    "`event: resync` first: read GET /v1/jobs again. A comment is sent every 15 s of quiet. "
    "The stream ends, after a whole event, when the server stops: reconnect with "
    "`Last-Event-ID`.",
    response_class=EventSourceResponse,
    responses={200: {"content": {"text/event-stream": _STREAM_SCHEMA}}},
)
async def all_events(
    services: ServicesDep,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID", max_length=32)] = None,
) -> AsyncIterator[ServerSentEvent]:
    events = services.events
    seen = events.latest
    if last_event_id is None:
        yield ServerSentEvent(id=str(seen), event="ready", data={})
    elif (resumed := _resumable(last_event_id, events)) is None:
        yield ServerSentEvent(id=str(seen), event="resync", data={})
    else:
        seen = resumed
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


class EndStreamsOnStop:
    """An event stream (a `text/event-stream` response: a job's events, /v1/events) ends when
    the server stops (`StopSignal`): its route is cancelled between two events, never within
    one, and the response is finished, so the client sees the stream close after whole events
    rather than a connection reset once uvicorn's graceful-shutdown timeout cancels it. So does
    a stream whose connection is shed for a new one (`api.connections`). Other responses are
    left alone: a held `Prefer: wait` is answered by the service itself."""

    def __init__(self, app: ASGIApp, *, stopped: Callable[[], StopSignal]) -> None:
        """`stopped`: the running server's signal (made anew by each start of the lifespan)."""
        self._app = app
        self._stopped = stopped

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        streaming = finished = False

        with anyio.CancelScope() as route, ExitStack() as interruptible:

            async def send_events(message: Message) -> None:
                nonlocal streaming, finished
                if not streaming:
                    if message["type"] == "http.response.start" and _is_event_stream(message):
                        streaming = True
                        interruptible.enter_context(self._stopped().interrupting(route))
                        shed = scope.get("extensions", {}).get(SHED_EXTENSION)
                        if shed is not None:  # its connection's place may be taken
                            interruptible.enter_context(shed.interrupting(route))
                    await send(message)
                    return
                if message["type"] == "http.response.body" and not message.get("more_body"):
                    finished = True
                with anyio.CancelScope(shield=True):  # a stop never cuts an event in two
                    await send(message)

            await self._app(scope, receive, send_events)
        if route.cancel_called and not finished:  # the stop ended the route: end its stream
            await send({"type": "http.response.body", "body": b"", "more_body": False})


def _is_event_stream(start: Message) -> bool:
    for name, value in start.get("headers", ()):
        if name.lower() == b"content-type":
            return bool(value.partition(b";")[0].strip().lower() == b"text/event-stream")
    return False


def _resumable(last_event_id: str, events: JobEvents) -> int | None:
    """The event a client's `Last-Event-ID` names, if this process's log still has it: what the
    client missed is known then. ASCII digits only (`isdigit` takes other scripts' too)."""
    if not (last_event_id.isascii() and last_event_id.isdigit()):
        return None
    seen = int(last_event_id)
    return seen if events.changed_since(seen) is not None else None
