"""The deliverer against the memory outbox and an httpx mock transport: in order per job and
URL while other lanes go on, retried until delivered, given up at the window's end, and the
tries recorded."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import orjson
import pytest
from standardwebhooks import Webhook

from yolo_orch.domain import Job, JobKind, JobState
from yolo_orch.domain.webhook_routes import WebhookRoutes
from yolo_orch.domain.webhooks import DeliveryState, WebhookEvent, WebhookTarget
from yolo_orch.store.outbox_memory import MemoryOutbox
from yolo_orch.testing.webhooks import new_secret
from yolo_orch.webhooks.deliverer import Deliverer, RetryPolicy, Signer

SECRET = new_secret()


def job(job_id: str, url: str) -> Job:
    return Job(
        id=job_id,
        seq=1,
        kind=JobKind.INFERENCE,
        state=JobState.QUEUED,
        model="sim",
        spec={"inputs": ["a.jpg"], "params": {}},
        priority=0,
        gpus=1,
        attempt=0,
        max_attempts=3,
        created_at=datetime.now(UTC),
        webhook=WebhookTarget(url),
    )


@contextlib.asynccontextmanager
async def delivering(
    outbox: MemoryOutbox, answer: Callable[[httpx.Request], int], retry_for_s: float = 60
) -> AsyncIterator[list[tuple[str, str]]]:
    """Runs a deliverer whose requests `answer` answers; yields the (url, event) of each
    request that verified, in the order they came."""
    seen: list[tuple[str, str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        payload: dict[str, Any] = Webhook(SECRET).verify(request.content, dict(request.headers))
        seen.append((str(request.url), payload["data"]["event"]))
        return httpx.Response(answer(request))

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        deliverer = Deliverer(
            outbox,
            client,
            Signer((SECRET,)),
            RetryPolicy(retry_for_s=retry_for_s, base_s=0.01, max_s=0.05),
            concurrency=8,
            timeout_s=5,
            rng=random.Random(1),
        )
        task = asyncio.create_task(deliverer.run())
        try:
            yield seen
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def record(outbox: MemoryOutbox, kept: Job, *events: WebhookEvent) -> None:
    for event in events:
        assert outbox.record(None, kept, event, datetime.now(UTC))
    outbox.committed()


async def settled(outbox: MemoryOutbox, job_id: str, states: list[DeliveryState]) -> None:
    """Until the job's events are in `states` (their tries are recorded in batches)."""
    async with asyncio.timeout(10):
        while [d.state for d in await outbox.deliveries(job_id)] != states:
            await asyncio.sleep(0.005)


async def until(check: Callable[[], object]) -> None:
    async with asyncio.timeout(10):
        while not check():
            await asyncio.sleep(0.005)


async def test_a_failing_event_holds_back_the_later_ones_of_its_lane_only() -> None:
    outbox = MemoryOutbox(WebhookRoutes(), 0)
    failures = {"queued": 3}

    def answer(request: httpx.Request) -> int:
        event = orjson.loads(request.content)["data"]["event"]
        if request.url.host == "slow.lan" and failures.get(event, 0) > 0:
            failures[event] -= 1
            return 503
        return 204

    slow, fast = job("a", "http://slow.lan/h"), job("b", "http://fast.lan/h")
    async with delivering(outbox, answer) as seen:
        record(outbox, slow, WebhookEvent.QUEUED, WebhookEvent.STARTED, WebhookEvent.SUCCEEDED)
        record(outbox, fast, WebhookEvent.QUEUED, WebhookEvent.STARTED, WebhookEvent.SUCCEEDED)
        await until(lambda: len(seen) == 9)
        await settled(outbox, "a", [DeliveryState.DELIVERED] * 3)
    slow_seen = [event for url, event in seen if "slow" in url]
    assert slow_seen == ["queued"] * 4 + ["started", "succeeded"]
    fast_seen = [event for url, event in seen if "fast" in url]
    assert fast_seen == ["queued", "started", "succeeded"]
    # the fast lane did not wait for the slow one's retries
    assert seen.index(("http://fast.lan/h", "succeeded")) < seen.index(
        ("http://slow.lan/h", "started")
    )
    tries = (await outbox.deliveries("a"))[0].attempts
    assert [t.status_code for t in tries] == [503, 503, 503, 204]
    assert [t.error for t in tries] == ["answered 503"] * 3 + [None]


async def test_an_event_no_receiver_takes_is_given_up_and_the_next_one_goes() -> None:
    outbox = MemoryOutbox(WebhookRoutes(), 0)
    down = job("a", "http://down.lan/h")
    async with delivering(outbox, lambda request: 500, retry_for_s=0.3) as seen:
        record(outbox, down, WebhookEvent.QUEUED, WebhookEvent.STARTED)
        await settled(outbox, "a", [DeliveryState.FAILED] * 2)
    events = [event for _, event in seen]
    assert events.count("queued") >= 2  # tried again before it was given up
    assert events.index("started") > max(i for i, e in enumerate(events) if e == "queued")
    queued, _ = await outbox.deliveries("a")
    assert queued.next_at is None
    assert all(t.status_code == 500 for t in queued.attempts)


async def test_events_kept_before_the_deliverer_started_are_sent() -> None:
    outbox = MemoryOutbox(WebhookRoutes(), 0)
    record(outbox, job("a", "http://up.lan/h"), WebhookEvent.QUEUED)  # as after a restart
    async with delivering(outbox, lambda request: 204) as seen:
        await until(lambda: seen == [("http://up.lan/h", "queued")])
        await settled(outbox, "a", [DeliveryState.DELIVERED])


@pytest.mark.parametrize("every_s", [0.0, 3600.0])
async def test_progress_is_thinned_per_job(every_s: float) -> None:
    outbox = MemoryOutbox(WebhookRoutes(), every_s)
    running = job("a", "http://up.lan/h")
    kept = [
        outbox.record(None, running, WebhookEvent.PROGRESS, datetime.now(UTC)) for _ in range(5)
    ]
    assert kept == ([True] * 5 if every_s == 0 else [True, False, False, False, False])
    assert outbox.record(None, running, WebhookEvent.SUCCEEDED, datetime.now(UTC))
    # ended: a job of the same id again (a test's) starts its thinning afresh
    assert outbox.record(None, running, WebhookEvent.PROGRESS, datetime.now(UTC))
