"""Webhook events outlive the server: SIGKILLed with events not yet delivered (its receiver
was down, some jobs were mid-run), the restarted server delivers every one, in order per job,
signed."""

from __future__ import annotations

import pytest

from tests.support.servers import ServerFactory
from yolo_orch.testing import TERMINAL_STATES, free_port, sim_inference, wait_for, wait_terminal
from yolo_orch.testing.webhooks import WebhookReceiver, new_secret

JOBS = 8


@pytest.mark.acceptance
def test_events_left_undelivered_by_a_sigkill_are_delivered_after_the_restart(
    server_factory: ServerFactory,
) -> None:
    secret = new_secret()
    port = free_port()
    url = f"http://127.0.0.1:{port}/hooks"  # nothing listens there yet
    server = server_factory(
        sim_lanes=2,
        webhook_secrets=[secret],
        webhook_allowed_hosts=["127.0.0.1"],
        webhook_retry_base_s=0.05,
        webhook_retry_max_s=0.2,
    )
    server.start()
    with server.client() as client:
        job_ids = []
        for index in range(JOBS):
            job = sim_inference(f"w{index}", sim_seconds=0.3 if index < 4 else 4, sim_steps=2)
            job["webhook"] = {"url": url}
            response = client.post("/v1/jobs", json=job)
            assert response.status_code == 202, response.text
            job_ids.append(response.json()["id"])
        for job_id in job_ids[:4]:
            wait_terminal(client, job_id, timeout=20)

        def tried_and_refused() -> bool:
            for job_id in job_ids[:4]:
                found = client.get(f"/v1/jobs/{job_id}/deliveries").json()["deliveries"]
                if not found or not found[0]["attempts"]:
                    return False
            return True

        wait_for(tried_and_refused, timeout=10, what="the first tries, refused")
        before = {
            job_id: client.get(f"/v1/jobs/{job_id}/deliveries").json()["deliveries"]
            for job_id in job_ids
        }
    assert all(d["state"] == "pending" for found in before.values() for d in found)
    assert any(d["attempts"][0]["status_code"] is None for d in before[job_ids[0]])
    assert server.kill() == -9  # the long jobs mid-run: recovery settles them, with events

    with WebhookReceiver(secret, port=port) as receiver:
        server.start()
        with server.client() as client:
            ended = [wait_terminal(client, job_id, timeout=60) for job_id in job_ids]
            assert {job["state"] for job in ended} <= TERMINAL_STATES

            def all_delivered() -> dict[str, list[dict[str, object]]] | None:
                listings = {
                    job_id: client.get(f"/v1/jobs/{job_id}/deliveries").json()["deliveries"]
                    for job_id in job_ids
                }
                done = all(d["state"] == "delivered" for found in listings.values() for d in found)
                return listings if done else None

            listings = wait_for(all_delivered, timeout=30, what="every event delivered")

    assert all(each.verified for each in receiver.received)
    for job_id in job_ids:
        accepted = receiver.accepted_of(job_id)
        kept = listings[job_id]
        # Each kept event once, in the order it was kept (nothing was delivered before the kill).
        assert [each.id for each in accepted] == [d["id"] for d in kept]
        events = [each.event for each in accepted]
        assert events[:2] == ["queued", "started"], events
        assert events[-1] in {"succeeded", "failed", "cancelled"}, events
        assert [d["id"] for d in kept[: len(before[job_id])]] == [d["id"] for d in before[job_id]]
