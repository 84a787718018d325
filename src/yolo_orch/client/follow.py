"""Following a job until it ends: the server's event stream, or polling where there is none."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator

import httpx

from yolo_orch.client.errors import TERMINAL_STATES, ApiError, ExitCode
from yolo_orch.client.http import ApiClient, Json

POLL_INTERVAL_S = 0.5
RECONNECT_BUDGET_S = 30.0
"""How long a follower keeps trying to get the server back once it has heard from it."""
_FIRST_DELAY_S = 0.5
_MAX_DELAY_S = 5.0
_JOB_EVENTS = frozenset({"state", "progress", "message"})


class _Reconnects:
    """Retries with a growing delay while the server is away; gives up `budget_s` after it was
    last heard from. Before the server was first heard from, nothing is retried: a wrong URL or
    a server that is down fails at once."""

    def __init__(
        self, budget_s: float, sleep: Callable[[float], None], clock: Callable[[], float]
    ) -> None:
        self._budget_s = budget_s
        self._sleep = sleep
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

    def retry_after(self, error: ApiError) -> None:
        """Sleep before the next try, or raise `error` when it is time to give up."""
        if not self.heard_from or error.exit_code is not ExitCode.UNAVAILABLE:
            raise error
        now = self._clock()
        if self._away_since is None:
            self._away_since = now
        left = self._away_since + self._budget_s - now
        if left <= 0:
            raise error
        self._sleep(min(self._delay_s, left))
        self._delay_s = min(self._delay_s * 2, _MAX_DELAY_S)


def follow_job(
    api: ApiClient,
    job_id: str,
    *,
    poll_interval_s: float = POLL_INTERVAL_S,
    reconnect_budget_s: float = RECONNECT_BUDGET_S,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[Json]:
    """The job as `GET /v1/jobs/{id}` shows it, each time it changes, until it ends: the first
    one at once, the last one in a terminal state.

    Reads `GET /v1/jobs/{id}/events`; a dropped stream is resumed with `Last-Event-ID`. When the
    server has no event stream (404), polls the job every `poll_interval_s` instead."""
    reconnects = _Reconnects(reconnect_budget_s, sleep, clock)
    last_event_id: str | None = None
    while True:
        try:
            for event in api.events(job_id, last_event_id):
                reconnects.heard(event.retry)
                last_event_id = event.id or last_event_id  # "": no id sent yet
                job = _job_of(event.data) if event.event in _JOB_EVENTS else None
                if job is None:
                    continue
                yield job
                if job["state"] in TERMINAL_STATES:
                    return
            # The stream ended before the job did (a restart, a proxy timeout): resume it.
            reconnects.retry_after(
                ApiError("the event stream ended early", "stream_ended", ExitCode.UNAVAILABLE)
            )
        except ApiError as exc:
            if exc.status == httpx.codes.NOT_FOUND:  # no event stream here (or no such job)
                yield from _poll(api, job_id, poll_interval_s, reconnects, sleep)
                return
            reconnects.retry_after(exc)
        except httpx.TransportError as exc:  # dropped mid-stream, or timed out
            reconnects.retry_after(api.unreachable(exc))


def _poll(
    api: ApiClient,
    job_id: str,
    interval_s: float,
    reconnects: _Reconnects,
    sleep: Callable[[float], None],
) -> Iterator[Json]:
    previous: Json | None = None
    while True:
        try:
            job = api.job(job_id)
        except ApiError as exc:
            reconnects.retry_after(exc)
            continue
        reconnects.heard()
        if job != previous:
            yield job
            previous = job
        if job.get("state") in TERMINAL_STATES:
            return
        sleep(interval_s)


def _job_of(data: str) -> Json | None:
    try:
        job = json.loads(data)
    except ValueError:
        return None
    return job if isinstance(job, dict) and isinstance(job.get("state"), str) else None
