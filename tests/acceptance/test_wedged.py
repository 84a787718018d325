"""A job past its time limit whose thread does not stop (a simulated step is one long sleep):
the job fails `timeout`, its lane is wedged, the job beside it finishes, then the server exits
76 for systemd to restart it, and the queued job runs after the restart."""

from __future__ import annotations

import pytest

from tests.support.servers import ServerFactory, db_rows, get_job, submit
from yolo_orch.cli import EXIT_WEDGED
from yolo_orch.testing import sim_inference, wait_for, wait_terminal


@pytest.mark.acceptance
def test_a_thread_that_ignores_its_time_limit_wedges_the_lane_and_restarts_the_server(
    server_factory: ServerFactory,
) -> None:
    server = server_factory(sim_lanes=2, wedge_grace_s=0.5)
    server.start()
    with server.client() as client:
        bystander = submit(client, sim_inference("bystander", sim_seconds=6, sim_steps=60))
        wait_for(lambda: get_job(client, bystander["id"])["state"] == "running", 10, "bystander")
        stuck = submit(client, sim_inference("stuck", sim_seconds=60, sim_steps=1, timeout_s=0.5))
        failed = wait_terminal(client, stuck["id"], timeout=20)
        assert (failed["state"], failed["error"]["code"]) == ("failed", "timeout")
        devices = client.get("/v1/devices").json()["devices"]
        assert [lane["id"] for lane in devices if lane["wedged"]] == failed["devices"]
        assert client.get("/readyz").json()["status"] == "degraded"
        queued = submit(client, sim_inference("queued"))
        assert server.wait(timeout=30) == EXIT_WEDGED

    rows = dict(db_rows(server, "SELECT id, state FROM jobs"))
    assert rows[bystander["id"]] == "succeeded"
    assert rows[queued["id"]] == "queued"

    server.start()  # what systemd's Restart=on-failure does
    with server.client() as client:
        assert wait_terminal(client, queued["id"], timeout=20)["state"] == "succeeded"
