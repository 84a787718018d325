"""SIGTERM / SIGINT: refuse new jobs, keep answering polls, let running jobs finish within the
grace period, leave the rest for recovery at the next start, and exit 0. On a Ray cluster the
jobs left behind go on in their actors, and the next start follows them to their end."""

from __future__ import annotations

import signal
import time

import pytest

from tests.support.servers import ServerFactory, db_job, get_job, list_all_jobs, submit
from yolo_orch.testing import sim_inference, sim_runs, wait_for, wait_terminal

SHORT_S = 1.0
"""Ends well within the grace period."""
GRACE_S = {"threads": 2.0, "ray": 4.0}
"""On Ray, the short job's lane actor may start cold within the grace period (a second or two
on a small machine)."""
EXIT_SLACK_S = 4.0


@pytest.mark.acceptance
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_drain_finishes_short_jobs_and_requeues_long_ones(
    server_factory: ServerFactory, executor_settings: dict[str, object], sig: signal.Signals
) -> None:
    if sig is signal.SIGINT and executor_settings["executor"] == "ray":
        pytest.skip("the signal is the server's concern: SIGTERM covers Ray")
    grace_s = GRACE_S[str(executor_settings["executor"])]
    long_s = grace_s + 3.0  # outlives the grace period; its runner checks for cancel often
    server = server_factory(shutdown_grace_s=grace_s, sim_lanes=2, **executor_settings)
    server.start()
    with server.client() as client:
        short = submit(client, sim_inference("short.jpg", sim_seconds=SHORT_S, sim_steps=10))
        long = submit(client, sim_inference("long.jpg", sim_seconds=long_s, sim_steps=100))
        wait_for(
            lambda: all(get_job(client, job["id"])["state"] == "running" for job in (short, long)),
            timeout=5,
            what="both jobs to run",
        )

        server.send(sig)
        signalled = time.monotonic()

        refused = client.post("/v1/jobs", json=sim_inference("too-late.jpg", sim_seconds=0.05))
        assert refused.status_code == 503, refused.text
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.json()["code"] == "shutting_down"
        assert refused.headers["Retry-After"]
        assert get_job(client, long["id"])["state"] == "running"
        # Polls keep working while the short job finishes.
        done = wait_terminal(client, short["id"], timeout=grace_s + EXIT_SLACK_S)
        assert done["state"] == "succeeded"
        assert get_job(client, long["id"])["state"] == "running"

    code = server.wait(timeout=grace_s + EXIT_SLACK_S)
    stopped_after = time.monotonic() - signalled
    assert code == 0
    assert stopped_after < grace_s + EXIT_SLACK_S
    assert stopped_after >= grace_s - 0.5, "the long job did not get its grace period"
    assert db_job(server, short["id"]) == ("succeeded", 1)
    assert db_job(server, long["id"]) == ("running", 1)
    assert sim_runs(server.data_dir, short["id"]) == [1]
    assert sim_runs(server.data_dir, long["id"]) == []

    server.start()
    with server.client() as client:
        again = wait_terminal(client, long["id"], timeout=long_s + 10)
        assert again["state"] == "succeeded"
        assert again["attempt"] == 1  # a drain crashed nothing: its attempt was given back
        # The refused submission left no job behind.
        assert [job["inputs"] for job in list_all_jobs(client)] == [["long.jpg"], ["short.jpg"]]
    assert sim_runs(server.data_dir, long["id"]) == [1]
    assert server.stop(signal.SIGTERM) == 0


@pytest.mark.acceptance
def test_drain_never_cancels_a_job_nobody_cancelled(
    server_factory: ServerFactory, executor_settings: dict[str, object]
) -> None:
    """The signal lands while the dispatcher is starting a job: that job must finish, or be left
    for the next start, which runs it. It must not end `cancelled`: no client asked for that."""
    grace_s = GRACE_S[str(executor_settings["executor"])]
    server = server_factory(shutdown_grace_s=grace_s, sim_lanes=2, **executor_settings)
    server.start()
    with server.client() as client:
        first = submit(client, sim_inference("first.jpg", sim_seconds=0.5, sim_steps=10))
        wait_for(
            lambda: get_job(client, first["id"])["state"] == "running", 5, "the first job to run"
        )
        late = submit(client, sim_inference("late.jpg", sim_seconds=2.0, sim_steps=40))
        server.send(signal.SIGTERM)  # while the dispatcher claims the late job
    assert server.wait(timeout=10) == 0
    assert db_job(server, first["id"]) == ("succeeded", 1)
    state, _ = db_job(server, late["id"])
    assert state in {"queued", "running", "succeeded"}, f"the drain left the late job {state}"

    server.start()
    with server.client() as client:
        assert wait_terminal(client, late["id"], timeout=10)["state"] == "succeeded"
