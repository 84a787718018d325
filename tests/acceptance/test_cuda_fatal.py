"""A sticky CUDA error poisons the process: the jobs running in it fail as `cuda_fatal`, the
server exits non-zero so that systemd restarts it, and the queued jobs run after the restart."""

from __future__ import annotations

import pytest

from tests.support.servers import ServerFactory, db_rows, get_job, submit
from yolo_orch.cli import EXIT_CUDA_FATAL
from yolo_orch.testing import sim_inference, wait_for, wait_terminal


@pytest.mark.acceptance
def test_a_fatal_cuda_error_restarts_the_server_and_loses_no_queued_job(
    server_factory: ServerFactory,
) -> None:
    server = server_factory(sim_lanes=2)
    server.start()
    with server.client() as client:
        bystander = submit(client, sim_inference("bystander", sim_seconds=30, sim_steps=300))
        wait_for(lambda: get_job(client, bystander["id"])["state"] == "running", 10, "bystander")
        # The other lane runs the culprit; the queued job waits behind it.
        culprit = submit(client, sim_inference("culprit", sim_fail="cuda_fatal", sim_steps=2))
        queued = submit(client, sim_inference("queued", priority=-1))
        assert server.wait(timeout=20) == EXIT_CUDA_FATAL

    rows = dict(db_rows(server, "SELECT id, state || ' ' || COALESCE(error_code, '') FROM jobs"))
    assert rows[culprit["id"]] == "failed cuda_fatal"
    assert rows[bystander["id"]] == "failed cuda_fatal"
    assert rows[queued["id"]] == "queued "

    server.start()  # what systemd's Restart=on-failure does
    with server.client() as client:
        assert wait_terminal(client, queued["id"], timeout=20)["state"] == "succeeded"
