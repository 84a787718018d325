"""Webhook values: the hosts a delivery may reach, who wants which event, the payload, the
retry schedule, the signatures, and the settings refused at start."""

from __future__ import annotations

import ipaddress
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError
from standardwebhooks import Webhook, WebhookVerificationError

from yolo_orch.config.webhooks import Webhooks
from yolo_orch.domain import Job, JobKind, JobState, Progress
from yolo_orch.domain.webhook_hosts import WebhookHosts
from yolo_orch.domain.webhook_routes import WebhookRoutes, webhook_payload
from yolo_orch.domain.webhooks import (
    TERMINAL_EVENTS,
    OutboxEvent,
    WebhookEndpoint,
    WebhookEvent,
    WebhookTarget,
    events_of,
)
from yolo_orch.errors import InvalidJob
from yolo_orch.testing.webhooks import new_secret
from yolo_orch.webhooks.deliverer import RetryPolicy, Signer

T0 = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def job(**fields: Any) -> Job:
    values: dict[str, Any] = {
        "id": "j1",
        "seq": 1,
        "kind": JobKind.INFERENCE,
        "state": JobState.RUNNING,
        "model": "detector@production",
        "spec": {"inputs": ["a.jpg"], "params": {}},
        "priority": 0,
        "gpus": 1,
        "attempt": 1,
        "max_attempts": 3,
        "created_at": T0,
        "model_id": "m-1",
    }
    values.update(fields)
    return Job(**values)


@pytest.mark.parametrize(
    ("entries", "url", "allowed"),
    [
        (["hooks.example.com"], "https://hooks.example.com/x", True),
        (["hooks.example.com"], "https://HOOKS.example.com./x", True),
        (["*.example.com"], "https://a.b.example.com/x", True),
        (["*.example.com"], "https://example.com.evil.org/x", False),
        (["127.0.0.1"], "http://127.0.0.1:8080/x", True),
        (["127.0.0.0/8"], "http://127.0.0.2/x", True),
        (["0.0.0.0/0"], "http://93.184.216.34/x", True),
        (["0.0.0.0/0"], "http://10.1.2.3/x", False),  # private: a catch-all lists no such one
        (["0.0.0.0/0"], "http://169.254.169.254/latest", False),  # link-local (metadata)
        (["::/0"], "http://[::1]/x", False),
        (["fd00::/8"], "http://[fd00::5]/x", True),
        (["127.0.0.1"], "http://localhost/x", False),  # a name is matched as written
        ([], "https://hooks.example.com/x", False),
    ],
)
def test_hosts_at_submission(entries: list[str], url: str, allowed: bool) -> None:
    hosts = WebhookHosts(tuple(entries))
    if allowed:
        hosts.check(url)
        return
    with pytest.raises(InvalidJob) as refused:
        hosts.check(url)
    assert refused.value.code == "webhook_not_allowed"


def test_a_refusal_shows_the_url_without_its_credentials() -> None:
    with pytest.raises(InvalidJob) as refused:
        WebhookHosts(("a.lan",)).check("https://me:hunter2@b.lan/x?token=s3cret")
    assert "hunter2" not in str(refused.value)
    assert "s3cret" not in str(refused.value)


@pytest.mark.parametrize(
    ("entries", "address", "permitted"),
    [
        ([], "93.184.216.34", True),  # public: any listed name may resolve to one
        ([], "127.0.0.1", False),
        ([], "10.0.0.7", False),
        ([], "::ffff:127.0.0.1", False),  # loopback dressed as IPv6
        ([], "fe80::1", False),
        (["127.0.0.1"], "127.0.0.1", True),
        (["127.0.0.1"], "::ffff:127.0.0.1", True),
        (["10.0.0.0/8"], "10.9.9.9", True),
        (["0.0.0.0/0"], "192.168.1.1", False),
        (["hooks.lan"], "192.168.1.1", False),  # the name is listed, its private address not
    ],
)
def test_addresses_at_delivery(entries: list[str], address: str, permitted: bool) -> None:
    hosts = WebhookHosts(tuple(entries))
    assert hosts.permits(ipaddress.ip_address(address)) is permitted


def test_events_filters() -> None:
    assert events_of([]) == frozenset()
    assert events_of(["completed"]) == TERMINAL_EVENTS
    assert events_of(["started", "failed"]) == {WebhookEvent.STARTED, WebhookEvent.FAILED}
    with pytest.raises(ValueError, match="'finished' is none of"):
        events_of(["finished"])


def test_routes_send_each_url_once_and_only_what_its_filters_take() -> None:
    own = WebhookTarget("https://a.lan/own", frozenset({WebhookEvent.SUCCEEDED}))
    routes = WebhookRoutes(
        (
            WebhookEndpoint("https://a.lan/own"),  # the job's own URL again: sent once
            WebhookEndpoint(
                "https://b.lan/ends", events=TERMINAL_EVENTS, kinds=frozenset({"inference"})
            ),
            WebhookEndpoint("https://c.lan/trainings", kinds=frozenset({"training"})),
            WebhookEndpoint("https://d.lan/prod", models=frozenset({"detector@production"})),
            WebhookEndpoint("https://e.lan/by-id", models=frozenset({"m-1"})),
            WebhookEndpoint("https://f.lan/other", models=frozenset({"other"})),
        )
    )
    ended = job(webhook=own, state=JobState.SUCCEEDED)
    assert routes.urls(ended, WebhookEvent.SUCCEEDED) == [
        "https://a.lan/own",
        "https://b.lan/ends",
        "https://d.lan/prod",
        "https://e.lan/by-id",
    ]
    assert routes.urls(ended, WebhookEvent.STARTED) == [
        "https://a.lan/own",  # as a server endpoint, which takes every event
        "https://d.lan/prod",
        "https://e.lan/by-id",
    ]
    assert WebhookRoutes().urls(job(), WebhookEvent.QUEUED) == []


def test_the_payload_is_the_standard_webhooks_shape() -> None:
    running = job(progress=Progress(3, 10, "images"), started_at=T0)
    payload = webhook_payload(running, WebhookEvent.PROGRESS, T0 + timedelta(seconds=2))
    assert payload["type"] == "job.progress"
    assert payload["timestamp"] == "2026-12-05T12:00:02+00:00"
    data = payload["data"]
    assert (data["id"], data["event"], data["state"], data["kind"]) == (
        "j1",
        "progress",
        "running",
        "inference",
    )
    assert (data["model"], data["model_id"]) == ("detector@production", "m-1")
    assert data["progress"] == {"done": 3, "total": 10, "unit": "images"}
    assert data["finished_at"] is None
    assert data["error"] is None


def outbox_event(created_at: datetime) -> OutboxEvent:
    return OutboxEvent(
        seq=1,
        id="msg_1",
        job_id="j1",
        url="https://a.lan/x",
        event=WebhookEvent.QUEUED,
        body=b"{}",
        created_at=created_at,
        attempts=0,
        next_at=created_at,
    )


def test_retries_back_off_with_full_jitter_until_the_window_ends() -> None:
    policy = RetryPolicy(retry_for_s=3600, base_s=1, max_s=60)
    rng = random.Random(7)
    event = outbox_event(T0)
    waits = {
        attempts: [
            (policy.next_try(event, attempts, T0, rng) - T0).total_seconds()  # type: ignore[operator]
            for _ in range(200)
        ]
        for attempts in (1, 2, 5, 20)
    }
    assert all(0 <= wait <= 1 for wait in waits[1])
    assert max(waits[2]) > 1  # the ceiling doubled
    assert all(0 <= wait <= 2 for wait in waits[2])
    assert all(0 <= wait <= 16 for wait in waits[5])
    assert max(waits[20]) <= 60  # capped
    assert len(set(waits[1])) > 100  # jittered, not one value
    late = T0 + timedelta(seconds=3599.5)
    assert policy.next_try(event, 20, late, rng) <= T0 + timedelta(seconds=3600)  # type: ignore[operator]
    assert policy.next_try(event, 21, T0 + timedelta(seconds=3600), rng) is None


def test_each_secret_of_a_rotation_verifies_the_same_delivery() -> None:
    old, new = new_secret(), new_secret()
    body = b'{"type":"job.queued"}'
    headers = Signer((old, new)).headers("msg_1", datetime.now(UTC), body)
    assert len(headers["webhook-signature"].split(" ")) == 2
    for secret in (old, new):
        assert Webhook(secret).verify(body, headers) == {"type": "job.queued"}
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(body, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(old).verify(body + b" ", headers)


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"webhook_secrets": ["not-a-secret"]}, "whsec_"),
        ({"webhook_secrets": ["whsec_c2hvcnQ="]}, "24 to 64 bytes"),
        ({"webhook_secrets": [new_secret() for _ in range(3)]}, "at most 2"),
        ({"webhook_allowed_hosts": ["127.0.0.1"]}, "webhook_secrets is empty"),
        ({"webhooks": [{"url": "https://a.lan/x"}]}, "webhook_secrets is empty"),
        (
            {"webhook_secrets": [new_secret()], "webhooks": [{"url": "https://a.lan/x"}]},
            "webhook_allowed_hosts is empty",
        ),
        (
            {
                "webhook_secrets": [new_secret()],
                "webhook_allowed_hosts": ["a.lan"],
                "webhooks": [{"url": "https://a.lan/x", "events": ["done"]}],
            },
            "'done' is none of",
        ),
        ({"webhook_secrets": [new_secret()], "webhook_allowed_hosts": ["a b"]}, "a b"),
        (
            {"webhook_secrets": [new_secret()], "webhook_allowed_hosts": ["10.0.0.0/33"]},
            "10.0.0.0/33",
        ),
    ],
)
def test_settings_refused_at_start(values: dict[str, Any], says: str) -> None:
    with pytest.raises(ValidationError, match=says.replace("(", r"\(")):
        Webhooks(**values)


def test_settings_of_a_server_with_webhooks() -> None:
    secret = new_secret()
    settings = Webhooks(
        webhook_secrets=[secret],
        webhook_allowed_hosts=["*.example.com"],
        webhooks=[
            {"url": "https://h.example.com/y", "events": ["completed"], "kinds": ["training"]}
        ],
    )
    assert settings.webhook_signing_secrets() == (secret,)
    assert secret not in repr(settings)
    (endpoint,) = settings.webhook_endpoints()
    assert endpoint.events == TERMINAL_EVENTS
    assert endpoint.kinds == {"training"}
