"""The deliverer: one asyncio task that sends what the outbox kept, at least once, in order per
job and URL (a later event waits until the earlier one is delivered or given up), each try
signed with every secret, retried with exponential backoff and full jitter until
`webhook_retry_for_s` after its event.

It holds at most `buffered` events (read in `seq` order, so each job and URL's events come in
order), sends at most `concurrency` at once, and records the tries in batches, one write for
all that ended meanwhile: a slow or dead receiver holds a connection and a lane of its own,
never the store's writer nor job admission. Woken by the outbox at each commit that kept an
event, by a try's end, and by the next retry's time."""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import anyio
import httpx
from standardwebhooks import Webhook

from yolo_orch.domain.streams import redacted
from yolo_orch.domain.webhooks import (
    DeliveryAttempt,
    DeliveryState,
    OutboxEvent,
    Settled,
)
from yolo_orch.ops.clock import utcnow
from yolo_orch.store.outbox import WebhookOutbox

log = logging.getLogger(__name__)

MAX_ANSWER_BYTES = 64 << 10
"""What is read of a receiver's answer: all of a small one, so its connection is kept for the
next delivery; a larger one is cut off, and its connection closed."""

READ_AGAIN_S = 1.0
"""After a failed read of the outbox, the wait before the next."""

Lane = tuple[str, str]
"""(job id, URL): the events that must arrive in order."""


@dataclass(frozen=True)
class RetryPolicy:
    retry_for_s: float
    base_s: float
    max_s: float

    def next_try(
        self, event: OutboxEvent, attempts: int, now: datetime, rng: random.Random
    ) -> datetime | None:
        """When to try `event` again after its `attempts`-th failed try, or None: given up.
        Full jitter: anywhere up to the exponential ceiling, so that receivers that failed
        together are not all tried again together; the last try is at the deadline."""
        deadline = event.created_at + timedelta(seconds=self.retry_for_s)
        if now >= deadline:
            return None
        ceiling = min(self.max_s, self.base_s * 2 ** min(attempts - 1, 60))
        return min(now + timedelta(seconds=rng.uniform(0, ceiling)), deadline)


class Signer:
    """Standard Webhooks headers; with two secrets, both signatures, space-separated, so a
    receiver holding either one verifies (rotation). The secrets go nowhere else."""

    def __init__(self, secrets: tuple[str, ...]) -> None:
        self._webhooks = tuple(Webhook(secret) for secret in secrets)

    def headers(self, msg_id: str, at: datetime, body: bytes) -> dict[str, str]:
        return {
            "content-type": "application/json",
            "webhook-id": msg_id,
            "webhook-timestamp": str(int(at.timestamp())),
            "webhook-signature": " ".join(hook.sign(msg_id, at, body) for hook in self._webhooks),
        }


class Deliverer:
    def __init__(
        self,
        outbox: WebhookOutbox,
        client: httpx.AsyncClient,
        signer: Signer,
        retry: RetryPolicy,
        *,
        concurrency: int,
        timeout_s: float,
        buffered: int = 10_000,
        prune_every_s: float = 600.0,
        clock: Callable[[], datetime] = utcnow,
        rng: random.Random | None = None,
    ) -> None:
        self._outbox = outbox
        self._client = client
        self._signer = signer
        self._retry = retry
        self._concurrency = concurrency
        self._timeout_s = timeout_s
        self._room = buffered
        self._prune_every_s = prune_every_s
        self._clock = clock
        self._rng = rng or random.Random()
        self._wake = asyncio.Event()
        self._lanes: dict[Lane, deque[OutboxEvent]] = {}
        self._held = 0
        """Events in `_lanes`, at most `_room`."""
        self._last_seq = 0
        """The highest `seq` read: the next read takes the events after it."""
        self._unread = True
        """Events may have been committed since the last read (at the start: those pending)."""
        self._due: list[tuple[datetime, int, Lane]] = []
        """A heap of the lanes whose first event waits for its time (none in flight)."""
        self._sending: set[asyncio.Task[None]] = set()
        self._settled: list[Settled] = []
        self._recorder: asyncio.Task[None] | None = None

    async def run(self) -> None:
        """Deliver until cancelled; then record the tries that ended (those in flight are
        sent again after a restart: at least once)."""
        self._outbox.on_commit(self._committed)
        pruning = asyncio.create_task(self._prune_every(self._prune_every_s), name="webhook-prune")
        try:
            while True:
                self._wake.clear()
                try:
                    await self._read_new()
                except Exception:  # the database's: what is pending stays so, read again
                    log.exception("could not read the webhook outbox; trying again")
                    self._unread = True
                    await asyncio.sleep(READ_AGAIN_S)
                self._start_due()
                await self._sleep()
        finally:
            pruning.cancel()
            self._outbox.on_commit(lambda: None)
            for task in self._sending:
                task.cancel()
            await asyncio.gather(pruning, *self._sending, return_exceptions=True)
            with contextlib.suppress(asyncio.CancelledError):
                if self._recorder is not None:
                    await asyncio.shield(self._recorder)
            if self._settled:
                await self._outbox.settle(self._settled)

    async def _prune_every(self, interval_s: float) -> None:
        """Forget, now and then, the finished events of jobs deleted since (retention)."""
        while True:
            await asyncio.sleep(interval_s)
            try:
                pruned = await self._outbox.prune()
            except Exception:  # the next round tries again
                log.exception("could not prune the webhook outbox")
                continue
            if pruned:
                log.info("forgot %d delivered webhook events of deleted jobs", pruned)

    def _committed(self) -> None:
        self._unread = True
        self._wake.set()

    async def _read_new(self) -> None:
        """Read what was committed since the last read, as far as there is room: only after a
        commit, not at each try's end (a read costs a thread's database work)."""
        free = self._room - self._held
        if free <= 0 or not self._unread:
            return
        self._unread = False
        events = await self._outbox.pending(self._last_seq, free)
        for event in events:
            self._last_seq = event.seq
            lane = (event.job_id, event.url)
            queue = self._lanes.setdefault(lane, deque())
            queue.append(event)
            self._held += 1
            if len(queue) == 1:
                heapq.heappush(self._due, (event.next_at, event.seq, lane))
        if len(events) == free:
            self._unread = True  # there may be more: read again once room is made

    def _start_due(self) -> None:
        now = self._clock()
        while self._due and self._due[0][0] <= now and len(self._sending) < self._concurrency:
            _, _, lane = heapq.heappop(self._due)
            task = asyncio.create_task(self._send(lane, self._lanes[lane][0]))
            self._sending.add(task)
            task.add_done_callback(self._sending.discard)

    async def _sleep(self) -> None:
        timeout = None
        if self._due and len(self._sending) < self._concurrency:
            timeout = max(0.0, (self._due[0][0] - self._clock()).total_seconds())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout)

    async def _send(self, lane: Lane, event: OutboxEvent) -> None:
        at = self._clock()
        started = time.perf_counter()
        status_code: int | None = None
        error = None
        try:
            with anyio.fail_after(self._timeout_s):
                headers = self._signer.headers(event.id, at, event.body)
                async with self._client.stream(
                    "POST", event.url, content=event.body, headers=headers
                ) as response:
                    status_code = response.status_code
                    await _drain(response)
        except Exception as exc:  # what the receiver or the network did: recorded, tried again
            if status_code is None:  # else the answer came: the rest is its body, dropped
                error = _failure(exc, self._timeout_s)
        if status_code is not None and not 200 <= status_code < 300:
            error = f"answered {status_code}"
        latency_ms = (time.perf_counter() - started) * 1000
        self._tried(
            lane, event, DeliveryAttempt(event.id, event.job_id, at, status_code, latency_ms, error)
        )

    def _tried(self, lane: Lane, event: OutboxEvent, attempt: DeliveryAttempt) -> None:
        attempts = event.attempts + 1
        now = self._clock()
        retry_at = None
        if attempt.error is None:
            state = DeliveryState.DELIVERED
        elif (retry_at := self._retry.next_try(event, attempts, now, self._rng)) is None:
            state = DeliveryState.FAILED
            log.warning(
                "webhook %s of job %s to %s given up after %d tries: %s",
                event.event,
                event.job_id,
                redacted(event.url),
                attempts,
                attempt.error,
            )
        else:
            state = DeliveryState.PENDING
        self._settled.append(Settled(attempt, state, attempts, retry_at or now))
        if self._recorder is None:
            self._recorder = asyncio.create_task(self._record())
        queue = self._lanes[lane]
        if retry_at is not None:  # pending: the lane waits for it
            queue[0] = replace(event, attempts=attempts, next_at=retry_at)
        else:
            queue.popleft()
            self._held -= 1
        if queue:
            heapq.heappush(self._due, (queue[0].next_at, queue[0].seq, lane))
        else:
            del self._lanes[lane]
        self._wake.set()

    async def _record(self) -> None:
        """Write the tries that ended, in batches, one write at a time."""
        try:
            while self._settled:
                batch, self._settled = self._settled, []
                try:
                    await self._outbox.settle(batch)
                except Exception:  # the tries are sent again after a restart: at least once
                    log.exception("could not record %d webhook tries", len(batch))
        finally:
            self._recorder = None


def _failure(exc: Exception, timeout_s: float) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer within {timeout_s:g} s"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


async def _drain(response: httpx.Response) -> None:
    """Read (and drop) the answer's body, up to `MAX_ANSWER_BYTES`: httpx keeps a connection
    for another request only once the answer before has been read to its end."""
    read = 0
    async for chunk in response.aiter_raw():
        read += len(chunk)
        if read > MAX_ANSWER_BYTES:
            return
