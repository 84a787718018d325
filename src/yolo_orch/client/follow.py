"""Following a job until it ends: the server's event stream, resumed with `Last-Event-ID` when it
drops, or polling where there is none. The reconnect policy is shared by both clients."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Generator, Iterator
from typing import Protocol

import httpx
from httpx_sse import ServerSentEvent
from pydantic import ValidationError

from yolo_orch.client.errors import ApiError, ClientCode, ExitCode
from yolo_orch.client.shapes import Job, JobEvent


class Client(Protocol):
    """What following needs of a client (`client.sync.Client`)."""

    def job(self, job_id: str, *, wait_s: float | None = None) -> Job: ...

    def stream_events(
        self, job_id: str, last_event_id: str | None = None
    ) -> Generator[ServerSentEvent, None, None]: ...

    def unreachable(self, exc: httpx.TransportError) -> ApiError: ...


POLL_INTERVAL_S = 0.5
RECONNECT_BUDGET_S = 30.0
"""How long a follower keeps trying to get the server back once it has heard from it."""
_FIRST_DELAY_S = 0.5
_MAX_DELAY_S = 5.0
_JOB_EVENTS = frozenset({"state", "progress", "message"})
STREAM_ENDED = ApiError(
    "the event stream ended early", ClientCode.STREAM_ENDED, ExitCode.UNAVAILABLE
)


class Reconnects:
    """Retries with a growing delay while the server is away; gives up `budget_s` after it was
    last heard from. Before the server was first heard from, nothing is retried: a wrong URL or
    a server that is down fails at once."""

    def __init__(self, budget_s: float, clock: Callable[[], float]) -> None:
        self._budget_s = budget_s
        self._clock = clock
        self._first_delay_s = _FIRST_DELAY_S
        self._delay_s = _FIRST_DELAY_S
        self._away_since: float | None = None
        self.heard_from = False

    def heard(self, retry_ms: int | None = None) -> None:
        self.heard_from = True
        self._away_since = None
        if retry_ms is not None:
            self._first_delay_s = retry_ms / 1000
        self._delay_s = self._first_delay_s

    def delay_after(self, error: ApiError) -> float:
        """How long to wait before the next try; raises `error` when it is time to give up."""
        if not self.heard_from or error.exit_code is not ExitCode.UNAVAILABLE:
            raise error
        now = self._clock()
        if self._away_since is None:
            self._away_since = now
        left = self._away_since + self._budget_s - now
        if left <= 0:
            raise error
        delay = min(self._delay_s, left)
        self._delay_s = min(self._delay_s * 2, _MAX_DELAY_S)
        return delay


def job_event(event: ServerSentEvent) -> JobEvent | None:
    """The job an event carries; None for other events and comments."""
    if event.event not in _JOB_EVENTS:
        return None
    try:
        job = Job.model_validate(json.loads(event.data))
    except (ValueError, ValidationError):
        return None
    return JobEvent(id=event.id or None, event=event.event, job=job)


def follow_events(
    client: Client,
    job_id: str,
    last_event_id: str | None = None,
    *,
    poll_interval_s: float = POLL_INTERVAL_S,
    reconnect_budget_s: float = RECONNECT_BUDGET_S,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Generator[JobEvent, None, None]:
    """The job's events until it ends (the last one in a terminal state). When the server has
    no event stream (404), the job is polled every `poll_interval_s` instead."""
    reconnects = Reconnects(reconnect_budget_s, clock)
    while True:
        try:
            for event in client.stream_events(job_id, last_event_id):
                reconnects.heard(event.retry)
                last_event_id = event.id or last_event_id  # "": no id sent yet
                followed = job_event(event)
                if followed is None:
                    continue
                yield followed
                if followed.job.state.is_terminal:
                    return
            # The stream ended before the job did (a restart, a proxy timeout): resume it.
            sleep(reconnects.delay_after(STREAM_ENDED))
        except ApiError as exc:
            if exc.status == httpx.codes.NOT_FOUND:  # no event stream here (or no such job)
                yield from _poll(client, job_id, poll_interval_s, reconnects, sleep)
                return
            sleep(reconnects.delay_after(exc))
        except httpx.TransportError as exc:  # dropped mid-stream, or timed out
            sleep(reconnects.delay_after(client.unreachable(exc)))


def _poll(
    client: Client,
    job_id: str,
    interval_s: float,
    reconnects: Reconnects,
    sleep: Callable[[float], None],
) -> Iterator[JobEvent]:
    previous: Job | None = None
    while True:
        try:
            job = client.job(job_id)
        except ApiError as exc:
            sleep(reconnects.delay_after(exc))
            continue
        reconnects.heard()
        if job != previous:
            changed = previous is None or job.state != previous.state
            yield JobEvent(id=None, event="state" if changed else "progress", job=job)
            previous = job
        if job.state.is_terminal:
            return
        sleep(interval_s)
