"""One server per data directory: a second `serve` on it refuses to start. (On PostgreSQL the
heads share one data directory and a lease decides which runs jobs: test_standby_heads.py.)"""

from __future__ import annotations

import pytest

from tests.support.servers import ServerFactory, submit
from yolo_orch.testing import sim_inference, wait_terminal


@pytest.mark.acceptance
@pytest.mark.sqlite_only
def test_second_server_on_the_same_data_dir_exits(server_factory: ServerFactory) -> None:
    first = server_factory("first")
    first.start()
    second = server_factory("second", data_dir=first.data_dir)
    second.start(wait_ready=False)

    code = second.wait(timeout=10)

    assert code != 0
    stderr = second.stderr()
    assert "another yolo-orch server" in stderr
    assert f"pid {first.pid}" in stderr
    assert str(first.data_dir.resolve()) in stderr
    assert first.running
    with first.client() as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        job = submit(client, sim_inference("after-the-refusal.jpg", sim_seconds=0.05))
        assert wait_terminal(client, job["id"], timeout=10)["state"] == "succeeded"
