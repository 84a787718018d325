"""A chain survives SIGKILL between and during its steps: after the restart it goes on where it
was, and every step runs to success exactly once (the step killed mid-run once more, as any job
interrupted by a crash); jobs waiting for others stay waiting, and start when those end."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.servers import ServerFactory, get_job, submit
from yolo_orch.testing import TERMINAL_STATES, wait_for


def _chain(client: Any, chain_id: str) -> dict[str, Any]:
    chain: dict[str, Any] = client.get(f"/v1/chains/{chain_id}").json()
    return chain


@pytest.mark.acceptance
def test_sigkill_during_a_chain_step_resumes_the_chain_where_it_was(
    server_factory: ServerFactory,
) -> None:
    server = server_factory(sim_lanes=2, max_attempts=3)
    server.start()
    with server.client() as client:
        body = {
            "kind": "training",
            "model": "sim",
            "params": {"sim_seconds": 1},
            "then": {
                "validate": {"params": {"sim_seconds": 3}},
                "export": {"formats": ["onnx", "torchscript"]},
            },
        }
        training = submit(client, body)
        waiting = submit(
            client,
            {
                "kind": "training",
                "model": "sim",
                "params": {"sim_seconds": 0.1},
                "after": [training["id"]],
            },
        )
        chain_id = training["id"]
        wait_for(
            lambda: get_job(client, chain_id)["state"] == "running",
            timeout=30,
            what="the training to run",
            interval=0.02,
        )
    # Killed while the training runs: its steps, and the job after it, wait across the restart.
    assert server.kill() == -9
    server.start()
    with server.client() as client:
        validation = wait_for(
            lambda: next(
                (
                    step
                    for step in _chain(client, chain_id)["steps"]
                    if step["kind"] == "validation" and step["state"] == "running"
                ),
                None,
            ),
            timeout=30,
            what="the validation step to run",
            interval=0.05,
        )
    assert server.kill() == -9
    server.start()
    with server.client() as client:
        chain = wait_for(
            lambda: (c := _chain(client, chain_id))["state"] not in ("queued", "running") and c,
            timeout=60,
            what="the chain to end",
            interval=0.2,
        )
        assert chain["state"] == "succeeded"
        steps = {step["id"]: step for step in chain["steps"]}
        assert [step["kind"] for step in chain["steps"]] == [
            "training",
            "validation",
            "export",
            "export",
        ]
        assert all(step["state"] == "succeeded" for step in steps.values())
        # The killed steps ran again (their attempts counted); the others ran once.
        assert steps[chain_id]["attempt"] == 2
        assert steps[validation["id"]]["attempt"] == 2
        assert [s["attempt"] for s in chain["steps"][2:]] == [1, 1]
        exports = [step for step in chain["steps"] if step["kind"] == "export"]
        assert all(e["started_at"] >= steps[validation["id"]]["finished_at"] for e in exports)
        # The job that waited for the training ran after it (running or not at the kill).
        after = wait_for(
            lambda: (j := get_job(client, waiting["id"]))["state"] in TERMINAL_STATES and j,
            timeout=30,
            what="the waiting job to end",
        )
        assert after["state"] == "succeeded"
        assert after["started_at"] >= steps[chain_id]["finished_at"]
