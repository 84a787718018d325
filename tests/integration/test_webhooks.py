"""Webhooks through the app's own lifespan, against a loopback receiver that verifies every
delivery with the `standardwebhooks` library: in order, at least once, retried, signed with
each secret, thinned, listed, given up, and refused where the hosts do not allow them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import serve, sim_job, wait_terminal
from tests.support.problems import assert_problem
from yolo_orch.app import create_app
from yolo_orch.config import MEMORY_DATABASE_URL, Settings
from yolo_orch.testing.webhooks import WebhookReceiver, new_secret

LOOPBACK = ["127.0.0.1"]
FAST_RETRIES = {"webhook_retry_base_s": 0.02, "webhook_retry_max_s": 0.1}


def hooked(url: str, events: list[str] | None = None, **fields: Any) -> dict[str, Any]:
    return sim_job(webhook={"url": url, "events": events or []}, **fields)


async def until(check: Callable[[], object], deadline_s: float = 10.0) -> None:
    async with asyncio.timeout(deadline_s):
        while not check():
            await asyncio.sleep(0.01)


@pytest.fixture(params=["memory", "sqlite"])
def store_settings(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The in-memory store, or SQLite in the test's data_dir (the default database)."""
    return {"database_url": MEMORY_DATABASE_URL if request.param == "memory" else ""}


async def test_a_receiver_failing_three_times_gets_each_event_once_in_order_signed(
    settings_factory: Callable[..., Settings], store_settings: dict[str, Any]
) -> None:
    secret = new_secret()
    settings = settings_factory(
        webhook_secrets=[secret], webhook_allowed_hosts=LOOPBACK, **FAST_RETRIES, **store_settings
    )
    with WebhookReceiver(secret, fail_first=3) as receiver:
        async with serve(create_app(settings)) as client:
            response = await client.post("/v1/jobs", json=hooked(receiver.url))
            assert response.status_code == 202, response.text
            job_id = response.json()["id"]
            await wait_terminal(client, job_id)
            await until(lambda: [r.event for r in receiver.accepted()][-1:] == ["succeeded"])
            deliveries = (await client.get(f"/v1/jobs/{job_id}/deliveries")).json()["deliveries"]

    accepted = receiver.accepted_of(job_id)
    events = [each.event for each in accepted]
    assert events[:2] == ["queued", "started"]
    assert events[-1] == "succeeded"
    assert set(events[2:-1]) <= {"progress"}
    assert len({each.id for each in accepted}) == len(accepted), "an event was accepted twice"
    assert all(each.verified for each in receiver.received)
    for each in accepted:  # each was refused three times before, and sent after nothing else
        tries = [r for r in receiver.received if r.id == each.id]
        assert [r.status for r in tries] == [500, 500, 500, 204]
    order = [r.id for r in receiver.received]
    assert order == sorted(order, key=[each.id for each in accepted].index)
    assert [d["event"] for d in deliveries] == events
    for delivery in deliveries:
        assert delivery["state"] == "delivered"
        assert delivery["url"] == receiver.url
        assert [a["status_code"] for a in delivery["attempts"]] == [500, 500, 500, 204]
        assert [a["error"] for a in delivery["attempts"]] == ["answered 500"] * 3 + [None]
        assert all(a["latency_ms"] >= 0 for a in delivery["attempts"])
    payload = accepted[-1].payload
    assert payload["type"] == "job.succeeded"
    assert payload["data"]["state"] == "succeeded"
    assert payload["data"]["kind"] == "inference"
    assert payload["data"]["result"] is not None


async def test_either_secret_of_a_rotation_verifies(
    settings_factory: Callable[..., Settings],
) -> None:
    old, new = new_secret(), new_secret()
    settings = settings_factory(webhook_secrets=[old, new], webhook_allowed_hosts=LOOPBACK)
    with (
        WebhookReceiver(old) as on_old,
        WebhookReceiver(new) as on_new,
        WebhookReceiver(new_secret()) as stranger,
    ):
        async with serve(create_app(settings)) as client:
            for receiver in (on_old, on_new, stranger):
                job = hooked(receiver.url, ["completed"])
                response = await client.post("/v1/jobs", json=job)
                assert response.status_code == 202, response.text
            await until(lambda: on_old.accepted() and on_new.accepted() and stranger.received)
    for receiver in (on_old, on_new):
        assert [(r.event, r.verified) for r in receiver.received] == [("succeeded", True)]
    assert not any(r.verified for r in stranger.received)
    assert stranger.accepted() == []


async def test_progress_events_are_thinned_per_job(
    settings_factory: Callable[..., Settings],
) -> None:
    secret = new_secret()
    slow_steps = {"sim_seconds": 2.0, "sim_steps": 20}  # a progress write each 0.25 s
    counts = {}
    for every_s in (0, 3600):
        settings = settings_factory(
            webhook_secrets=[secret],
            webhook_allowed_hosts=LOOPBACK,
            webhook_progress_every_s=every_s,
        )
        with WebhookReceiver(secret) as receiver:
            async with serve(create_app(settings)) as client:
                job = hooked(receiver.url, ["progress", "completed"], params=slow_steps)
                job_id = (await client.post("/v1/jobs", json=job)).json()["id"]
                await wait_terminal(client, job_id)
                await until(
                    lambda: (
                        receiver.accepted()[-1:] and receiver.accepted()[-1].event == "succeeded"
                    )
                )
        counts[every_s] = sum(r.event == "progress" for r in receiver.accepted())
    assert counts[3600] == 1, counts
    assert counts[0] >= 3, counts


async def test_an_event_is_given_up_as_failed_after_the_retry_window(
    settings_factory: Callable[..., Settings],
) -> None:
    secret = new_secret()
    settings = settings_factory(
        webhook_secrets=[secret],
        webhook_allowed_hosts=LOOPBACK,
        webhook_retry_for_s=1,
        **FAST_RETRIES,
    )
    with WebhookReceiver(secret, fail_first=10_000) as receiver:
        async with serve(create_app(settings)) as client:
            job_id = (await client.post("/v1/jobs", json=hooked(receiver.url, ["queued"]))).json()[
                "id"
            ]

            async def given_up() -> list[dict[str, Any]]:
                while True:
                    answer = await client.get(f"/v1/jobs/{job_id}/deliveries")
                    found: list[dict[str, Any]] = answer.json()["deliveries"]
                    if found and found[0]["state"] == "failed":
                        return found
                    await asyncio.sleep(0.05)

            async with asyncio.timeout(10):
                (delivery,) = await given_up()
    assert delivery["event"] == "queued"
    assert delivery["next_at"] is None
    assert len(delivery["attempts"]) >= 3
    assert {a["status_code"] for a in delivery["attempts"]} == {500}
    assert len(receiver.received) == len(delivery["attempts"])


async def test_server_endpoints_take_the_events_their_filters_take(
    settings_factory: Callable[..., Settings],
) -> None:
    secret = new_secret()
    with WebhookReceiver(secret) as ends, WebhookReceiver(secret) as trainings:
        settings = settings_factory(
            webhook_secrets=[secret],
            webhook_allowed_hosts=LOOPBACK,
            webhooks=[
                {"url": ends.url, "events": ["completed"], "kinds": ["inference"]},
                {"url": trainings.url, "kinds": ["training"]},
            ],
        )
        async with serve(create_app(settings)) as client:
            job_id = (await client.post("/v1/jobs", json=sim_job())).json()["id"]
            await wait_terminal(client, job_id)
            await until(lambda: ends.accepted())
            deliveries = (await client.get(f"/v1/jobs/{job_id}/deliveries")).json()["deliveries"]
    assert [(r.job_id, r.event) for r in ends.accepted()] == [(job_id, "succeeded")]
    assert trainings.received == []
    assert [(d["url"], d["event"]) for d in deliveries] == [(ends.url, "succeeded")]


async def test_a_name_that_resolves_to_an_unlisted_loopback_address_is_not_sent_to(
    settings_factory: Callable[..., Settings],
) -> None:
    # `localhost` passes the check at submission (as written), but the delivery resolves it
    # to 127.0.0.1, which no entry lists: refused, as a rebinding name would be.
    secret = new_secret()
    settings = settings_factory(
        webhook_secrets=[secret], webhook_allowed_hosts=["localhost"], **FAST_RETRIES
    )
    with WebhookReceiver(secret) as receiver:
        url = receiver.url.replace("127.0.0.1", "localhost")
        async with serve(create_app(settings)) as client:
            job_id = (await client.post("/v1/jobs", json=hooked(url, ["queued"]))).json()["id"]

            async def tried() -> dict[str, Any]:
                while True:
                    answer = await client.get(f"/v1/jobs/{job_id}/deliveries")
                    found = answer.json()["deliveries"]
                    if found and found[0]["attempts"]:
                        return dict(found[0])
                    await asyncio.sleep(0.02)

            async with asyncio.timeout(10):
                delivery = await tried()
    assert receiver.received == []
    attempt = delivery["attempts"][0]
    assert attempt["status_code"] is None
    assert "resolves to 127.0.0.1" in attempt["error"]
    assert "webhook_allowed_hosts" in attempt["error"]


@pytest.mark.parametrize(
    ("allowed", "url"),
    [
        (["127.0.0.1"], "http://198.51.100.7/hooks"),  # not listed
        (["0.0.0.0/0"], "http://10.0.0.1/hooks"),  # private: a catch-all does not list it
        (["0.0.0.0/0"], "http://[::1]/hooks"),  # loopback, and another family besides
        (["*.example.com"], "http://example.org/hooks"),  # a name not listed
        (["127.0.0.1"], "ftp://127.0.0.1/hooks"),  # not http(s)
    ],
)
async def test_a_webhook_the_hosts_do_not_allow_is_refused_at_submission(
    settings_factory: Callable[..., Settings], allowed: list[str], url: str
) -> None:
    settings = settings_factory(webhook_secrets=[new_secret()], webhook_allowed_hosts=allowed)
    async with serve(create_app(settings)) as client:
        response = await client.post("/v1/jobs", json=hooked(url))
        if url.startswith("ftp"):  # the request model already wants http(s)
            assert_problem(response, 422, "invalid_request")
        else:
            problem = assert_problem(response, 422, "webhook_not_allowed")
            assert "webhook_allowed_hosts" in problem["detail"]
        assert (await client.get("/v1/jobs")).json()["jobs"] == []


async def test_deliveries_of_an_unknown_job_are_not_found(
    settings_factory: Callable[..., Settings],
) -> None:
    async with serve(create_app(settings_factory())) as client:
        assert_problem(await client.get("/v1/jobs/nope/deliveries"), 404, "job_not_found")
        job_id = (await client.post("/v1/jobs", json=sim_job())).json()["id"]
        answer = await client.get(f"/v1/jobs/{job_id}/deliveries")
        assert answer.status_code == 200
        assert answer.json() == {"deliveries": []}


async def test_a_server_without_webhooks_refuses_a_job_that_asks_for_one(
    settings_factory: Callable[..., Settings],
) -> None:
    async with serve(create_app(settings_factory())) as client:
        response = await client.post("/v1/jobs", json=hooked("http://127.0.0.1:9/hooks"))
        problem = assert_problem(response, 422, "webhook_not_allowed")
        assert "webhook_secrets" in problem["detail"]


async def test_the_events_of_a_deleted_job_are_forgotten_once_delivered(
    settings_factory: Callable[..., Settings],
) -> None:
    secret = new_secret()
    settings = settings_factory(
        database_url="", webhook_secrets=[secret], webhook_allowed_hosts=LOOPBACK
    )
    app = create_app(settings)
    with WebhookReceiver(secret) as receiver:
        async with serve(app) as client:
            kept_id = (await client.post("/v1/jobs", json=hooked(receiver.url))).json()["id"]
            gone_id = (await client.post("/v1/jobs", json=hooked(receiver.url))).json()["id"]
            for job_id in (kept_id, gone_id):
                await wait_terminal(client, job_id)
            await until(
                lambda: len([r for r in receiver.accepted() if r.event == "succeeded"]) == 2
            )
            outbox = app.state.services.webhook_outbox

            async def all_delivered() -> None:
                while True:
                    found = [*await outbox.deliveries(kept_id), *await outbox.deliveries(gone_id)]
                    if all(d.state == "delivered" for d in found):
                        return
                    await asyncio.sleep(0.02)

            async with asyncio.timeout(10):
                await all_delivered()
            assert (await client.delete(f"/v1/jobs/{gone_id}")).status_code == 204
            kept_before = await outbox.deliveries(kept_id)
            gone_events = len(await outbox.deliveries(gone_id))
            assert gone_events >= 3
            assert await outbox.prune() == gone_events
            assert await outbox.deliveries(gone_id) == []
            assert await outbox.deliveries(kept_id) == kept_before
            assert await outbox.prune() == 0
