"""SIGKILL of a server whose jobs run on a Ray cluster: the runs go on in their detached actors,
and the restarted server follows them again to their end; each job runs once, in its first
attempt, and no actor is left holding a run once the outcomes are committed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.servers import ServerFactory, get_job, ray_settings, submit
from yolo_orch.testing import sim_inference, sim_runs, sim_training, wait_for, wait_terminal
from yolo_orch.testing.postgres import PostgresCluster

pytestmark = [pytest.mark.acceptance, pytest.mark.ray]


def test_runs_that_outlive_a_sigkilled_server_finish_once(
    server_factory: ServerFactory, cluster: object
) -> None:
    import ray

    settings = ray_settings(cluster)
    server = server_factory(max_attempts=3, **settings)
    server.start()
    with server.client() as client:
        jobs = [
            submit(client, sim_inference("long.jpg", sim_seconds=3.0, sim_steps=30)),
            submit(client, sim_training("long/data.yaml", gpus=2, sim_seconds=3.0, sim_steps=30)),
        ]
        wait_for(
            lambda: all(get_job(client, job["id"])["progress"] for job in jobs),
            timeout=30,
            what="both jobs to make progress",
        )
    assert server.kill() == -9

    server.start()
    with server.client() as client:
        done = [wait_terminal(client, job["id"], timeout=30) for job in jobs]
    for job in done:
        assert (job["state"], job["attempt"]) == ("succeeded", 1), job
        assert sim_runs(server.data_dir, job["id"]) == [1]
        assert job["progress"]["done"] == 30, job
    assert server.stderr().count("still runs on") == 2, server.stderr()[-3000:]

    ray.init(address=str(settings["ray_address"]), namespace=str(settings["ray_namespace"]))
    try:
        # the job actors went with their committed outcomes (any left is one made ahead for a
        # node's next job); the lane actor holds no run
        names = ray.util.list_named_actors()
        hosts = [ray.get_actor(name) for name in names if name.startswith(("host:", "lane:"))]
        assert any(name.startswith("lane:") for name in names), names
        assert [ray.get(host.held.remote()) for host in hosts] == [0] * len(hosts)
    finally:
        ray.shutdown()


@pytest.mark.postgres
def test_a_standby_head_taking_over_follows_the_runs_of_the_killed_active_one(
    server_factory: ServerFactory, cluster: object, postgres: PostgresCluster, tmp_path: Path
) -> None:
    """Two heads on one PostgreSQL database and one Ray cluster: the active one is SIGKILLed
    while its jobs run on the nodes; the standby takes over and follows the same runs to their
    end, as a restarted server would, instead of running them again."""
    settings = {
        **ray_settings(cluster),
        "database_url": postgres.new_database(migrated=False),
        "head_lease_timeout_s": 2.0,
        "max_attempts": 3,
    }
    heads = [server_factory(name, data_dir=tmp_path / "shared", **settings) for name in "ab"]
    for head in heads:
        head.settings["head_url"] = head.url
    active, standby = heads
    active.start()
    standby.start()
    with active.client() as client:
        job = submit(client, sim_inference("long.jpg", sim_seconds=3.0, sim_steps=30))
        wait_for(
            lambda: get_job(client, job["id"])["progress"],
            timeout=30,
            what="the job to make progress",
        )
    assert active.kill() == -9
    with standby.client() as client:
        wait_for(
            lambda: client.get("/readyz").json()["status"] == "ready",
            timeout=30,
            what="the standby to take over",
        )
        done = wait_terminal(client, job["id"], timeout=30)
    assert (done["state"], done["attempt"]) == ("succeeded", 1), done
    assert sim_runs(standby.data_dir, job["id"]) == [1]
    assert "still runs on" in standby.stderr(), standby.stderr()[-3000:]
