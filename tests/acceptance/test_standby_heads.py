"""Two heads on one PostgreSQL database and one data directory: one active, one standing by.
The standby serves reads and sends writes to the active one (307); when the active dies the
standby takes over (recovery as at a restart), and an old active that comes back writes nothing."""

from __future__ import annotations

import hashlib
import json
import signal
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import sync_playwright

from tests.support.browser import find_chromium
from tests.support.servers import ServerFactory, all_ended
from yolo_orch.client import Client
from yolo_orch.testing import TERMINAL_STATES, Server, wait_for
from yolo_orch.testing.chaos import SUBMIT_TIMEOUT_S, Submitter, check_total_queue, submission
from yolo_orch.testing.jobs import sim_inference
from yolo_orch.testing.postgres import PostgresCluster

pytestmark = [pytest.mark.acceptance, pytest.mark.postgres]

LEASE_TIMEOUT_S = 2.0
EXIT_LEASE_LOST = 77


def heads(
    server_factory: ServerFactory, postgres: PostgresCluster, tmp_path: Path, **settings: object
) -> tuple[Server, Server]:
    database = postgres.new_database(migrated=False)
    shared = tmp_path / "shared-data"
    made = []
    for name in ("a", "b"):
        head = server_factory(
            name,
            data_dir=shared,
            database_url=database,
            head_lease_timeout_s=LEASE_TIMEOUT_S,
            sim_lanes=2,
            **settings,
        )
        head.settings["head_url"] = head.url
        made.append(head)
    return made[0], made[1]


def readiness(head: Server) -> dict[str, object]:
    with head.client(timeout=2.0) as client:
        body: dict[str, object] = client.get("/readyz").json()
        return body


def wait_active(head: Server, timeout: float = 15.0) -> float:
    """Seconds until `head` says it is the active one (ready)."""
    began = time.monotonic()
    wait_for(
        lambda: readiness(head)["status"] == "ready",
        timeout=timeout,
        what=f"{head.name} to become active",
        interval=0.05,
    )
    return time.monotonic() - began


def test_a_standby_serves_reads_and_sends_writes_to_the_active_head(
    server_factory: ServerFactory, postgres: PostgresCluster, tmp_path: Path
) -> None:
    active, standby = heads(server_factory, postgres, tmp_path)
    active.start()
    standby.start()
    assert readiness(active)["status"] == "ready"
    assert f"head: active (lease epoch 1), writes served at {active.url}" in active.stderr()
    assert f"head: standby, sending writes to {active.url}" in standby.stderr()
    state = readiness(standby)
    assert state["status"] == "standby"
    assert state["head"] == {"role": "standby", "active_url": active.url, "epoch": None}

    job = sim_inference("one.jpg", 0, sim_seconds=0.05)
    with standby.client() as client:
        sent_on = client.post("/v1/jobs", json=job)
        assert sent_on.status_code == 307
        assert sent_on.headers["location"] == f"{active.url}/v1/jobs"
        assert client.get("/v1/events").status_code == 307  # live: only the active sees it
        assert client.get("/v1/jobs", headers={"Prefer": "wait=1"}).status_code == 307
    with httpx.Client(base_url=standby.url, follow_redirects=True, timeout=10) as client:
        made = client.post("/v1/jobs", json=job)
        assert made.status_code == 202, made.text
        job_id = made.json()["id"]
        # read on the standby, from the shared database
        done = wait_for(
            lambda: (
                (got := client.get(f"/v1/jobs/{job_id}").json())["state"] == "succeeded" and got
            ),
            timeout=15,
            what="the job to succeed",
        )
    assert done["id"] == job_id
    assert standby.running
    assert active.running


def test_the_client_follows_a_standby_to_the_active_head_with_its_token(
    server_factory: ServerFactory, postgres: PostgresCluster, tmp_path: Path
) -> None:
    """httpx drops the token on a redirect to another origin (another port is one); the client
    keeps it for a standby's 307, as the server redirecting is the one it was given to."""
    token = "standby-test-token"
    tokens = json.dumps([{"sha256": hashlib.sha256(token.encode()).hexdigest(), "scope": "jobs"}])
    active, standby = heads(server_factory, postgres, tmp_path, tokens=tokens)
    active.start()
    standby.start()
    image = tmp_path / "upload.jpg"
    image.write_bytes(b"\xff\xd8 not decoded by the simulated runtime")
    with Client(standby.url, token) as client:
        job = client.submit_job(sim_inference("one.jpg", 0, sim_seconds=0.05), wait_s=10)
        assert job.state == "succeeded"
        assert client.job(job.id).id == job.id  # read on the standby
        uploaded = client.submit("sim", files=[image], wait_s=10)  # the body is sent again
        assert uploaded.state == "succeeded", uploaded
    with httpx.Client(base_url=standby.url, follow_redirects=True) as bare:
        headers = {"Authorization": f"Bearer {token}"}
        refused = bare.post("/v1/jobs", json=sim_inference("two.jpg", 0), headers=headers)
        assert refused.status_code == 401  # what a plain httpx client gets


def test_the_standby_takes_over_when_the_active_head_is_killed_losing_nothing(
    server_factory: ServerFactory, postgres: PostgresCluster, tmp_path: Path
) -> None:
    """The kill cycle: 4 clients submit to both heads while the active one is SIGKILLed, three
    times over; every acknowledged job ends, none twice, and each takeover is timed."""
    first, second = heads(server_factory, postgres, tmp_path, max_attempts=4)
    first.start()
    second.start()
    submissions = [submission(i) for i in range(240)]
    submitter = Submitter(first, submissions, urls=[first.url, second.url])
    takeovers = []
    active, standby = first, second
    with ThreadPoolExecutor(4) as pool:
        clients = [pool.submit(submitter.run_client) for _ in range(4)]
        for kill in range(3):
            submitter.wait_acked(50 * (kill + 1), timeout=SUBMIT_TIMEOUT_S)
            assert active.kill() == -9
            takeovers.append(wait_active(standby))
            active.start()  # back, as the standby now
            assert readiness(active)["status"] == "standby"
            active, standby = standby, active
        for future in clients:
            future.result(timeout=SUBMIT_TIMEOUT_S)

    outcomes = Counter(item.outcome for item in submissions)
    assert outcomes["pending"] == 0
    assert outcomes["refused"] == 0, [i.detail for i in submissions if i.outcome == "refused"]
    with active.client() as client:
        jobs = all_ended(client, timeout=60)
    check_total_queue(active, submissions, jobs)
    print(f"takeovers (s): {[round(t, 2) for t in takeovers]}; outcomes {dict(outcomes)}")
    # From the kill to the standby answering ready: the lease goes with the dead session at
    # once; the timeout is only for a head lost without its session ending.
    assert max(takeovers) < LEASE_TIMEOUT_S + 5


def test_a_paused_active_head_is_fenced_off_and_exits_when_it_resumes(
    server_factory: ServerFactory, postgres: PostgresCluster, tmp_path: Path
) -> None:
    """Split brain: the active head stops (SIGSTOP) while a job runs on it; once its lease has
    expired the standby ends its sessions and takes over, running the job again; the old head,
    resumed, writes nothing and exits."""
    old, new = heads(server_factory, postgres, tmp_path, max_attempts=3)
    old.start()
    new.start()
    with old.client() as client:
        job_id = client.post("/v1/jobs", json=sim_inference("slow.jpg", 0, sim_seconds=3)).json()[
            "id"
        ]
        wait_for(
            lambda: client.get(f"/v1/jobs/{job_id}").json()["state"] == "running",
            timeout=10,
            what="the job to run",
        )
    old.send(signal.SIGSTOP)
    try:
        took = wait_active(new, timeout=LEASE_TIMEOUT_S + 10)
        assert took >= LEASE_TIMEOUT_S * 0.5  # not at once: its session lived on
    finally:
        old.send(signal.SIGCONT)
    assert old.wait(timeout=LEASE_TIMEOUT_S + 10) == EXIT_LEASE_LOST
    assert "no longer active" in old.stderr()
    with new.client() as client:
        job = wait_for(
            lambda: (
                (got := client.get(f"/v1/jobs/{job_id}").json())["state"] in TERMINAL_STATES and got
            ),
            timeout=20,
            what="the job to end on the new active head",
        )
    assert job["state"] == "succeeded"
    assert job["attempt"] == 2  # the new head's run; the old one's success was never written


def test_the_heads_ride_out_a_database_restart(
    server_factory: ServerFactory, postgres: PostgresCluster, tmp_path: Path
) -> None:
    """The database goes away for longer than the lease and comes back: the active head exits
    (its supervisor would start it again), a head takes the lease again, and every job
    acknowledged before the cut ends."""
    one, two = heads(server_factory, postgres, tmp_path, max_attempts=3)
    one.start()
    two.start()
    with one.client() as client:
        ids = [
            client.post("/v1/jobs", json=sim_inference(f"cut-{i}.jpg", 0, sim_seconds=0.3)).json()[
                "id"
            ]
            for i in range(12)
        ]
    postgres.halt()
    try:
        time.sleep(LEASE_TIMEOUT_S * 2)
    finally:
        postgres.resume()
    assert one.wait(timeout=LEASE_TIMEOUT_S + 10) == EXIT_LEASE_LOST
    one.start(wait_ready=True)
    survivor = wait_for(
        lambda: next((h for h in (one, two) if readiness(h)["status"] == "ready"), None),
        timeout=30,
        what="a head to become active again",
        interval=0.1,
    )
    with survivor.client() as client:
        for job_id in ids:
            wait_for(
                lambda job_id=job_id: (
                    client.get(f"/v1/jobs/{job_id}").json()["state"] == "succeeded"
                ),
                timeout=30,
                what=f"job {job_id} to succeed",
            )


def test_a_draining_active_head_keeps_its_lease_until_it_has_stopped(
    server_factory: ServerFactory, postgres: PostgresCluster, tmp_path: Path
) -> None:
    """SIGTERM: the active head lets its running job finish for longer than the lease timeout,
    renewing meanwhile; the standby takes over once it has stopped, and a standby stops
    cleanly too."""
    active, standby = heads(server_factory, postgres, tmp_path, shutdown_grace_s=30)
    active.start()
    standby.start()
    with active.client() as client:
        job = client.post("/v1/jobs", json=sim_inference("long.jpg", 0, sim_seconds=5)).json()
        wait_for(
            lambda: client.get(f"/v1/jobs/{job['id']}").json()["state"] == "running",
            timeout=10,
            what="the job to run",
        )
    active.send(signal.SIGTERM)
    time.sleep(LEASE_TIMEOUT_S * 1.5)
    assert active.running  # still draining, past a lease timeout
    assert readiness(standby)["status"] == "standby"
    assert active.wait(timeout=15) == 0
    wait_active(standby)
    with standby.client() as client:
        done = client.get(f"/v1/jobs/{job['id']}").json()
    assert (done["state"], done["attempt"]) == ("succeeded", 1)
    assert standby.stop() == 0


def test_the_dashboard_of_a_standby_names_the_active_head(
    server_factory: ServerFactory, postgres: PostgresCluster, tmp_path: Path
) -> None:
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("Chromium is not installed (Debian: apt-get install chromium)")
    active, standby = heads(server_factory, postgres, tmp_path)
    active.start()
    standby.start()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium)
        try:
            page = browser.new_page()
            page.goto(f"{standby.url}/")
            note = page.locator("#head-note")
            note.wait_for(state="visible", timeout=10_000)
            assert "Standby head" in note.inner_text()
            assert note.locator("a").get_attribute("href") == f"{active.url}/"
            page.goto(f"{active.url}/")
            page.wait_for_selector("main[data-view='overview']")
            assert page.locator("#head-note").is_hidden()
        finally:
            browser.close()
