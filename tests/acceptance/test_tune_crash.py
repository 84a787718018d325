"""A tune job survives SIGKILL of its server mid-study, and a graceful stop: after the restart the
study is rebuilt from its trials in the store, no finished trial runs again, the trials that
were running are followed (requeued once, as any job a crash interrupted), not submitted anew,
and the restart costs the tune itself no attempt."""

from __future__ import annotations

import signal
from typing import Any

import httpx
import pytest

from tests.support.servers import ServerFactory, get_job, submit
from yolo_orch.runners.simulated import RUN_LOG
from yolo_orch.testing import TERMINAL_STATES, Server, wait_for

TRIALS = 6


def _trials(client: httpx.Client, tune_id: str) -> list[dict[str, Any]]:
    response = client.get("/v1/jobs", params={"chain": tune_id, "kind": "training"})
    jobs: list[dict[str, Any]] = response.json()["jobs"]
    return sorted(jobs, key=lambda job: job["created_at"])


def _tune_body() -> dict[str, Any]:
    return {
        "kind": "tune",
        "model": "sim",
        "params": {
            "space": {"lr0": {"low": 0.001, "high": 0.1, "log": True}},
            "trials": TRIALS,
            "epochs": 4,
            "pruner": "none",
            "base": {"sim_seconds": 1.5, "sim_steps": 4},
        },
    }


def _runs(server: Server, job_id: str) -> int:
    """How many times the job's run succeeded (the simulated runner notes each)."""
    log = server.data_dir / "jobs" / job_id / RUN_LOG
    return log.read_text().count("succeeded") if log.is_file() else 0


def _stop_mid_study(server: Server, tune_id: str, stop: Any) -> set[str]:
    """Stop the server once two trials have succeeded and others run; the ids of those done."""
    with server.client() as client:
        trials = wait_for(
            lambda: (
                (trials := _trials(client, tune_id))
                and sum(t["state"] == "succeeded" for t in trials) >= 2
                and any(t["state"] == "running" for t in trials)
                and trials
            ),
            timeout=30,
            what="two trials to succeed while others run",
            interval=0.05,
        )
    stop()
    return {t["id"] for t in trials if t["state"] == "succeeded"}


def _finished_tune(server: Server, tune_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    with server.client() as client:
        tune = wait_for(
            lambda: (job := get_job(client, tune_id))["state"] in TERMINAL_STATES and job,
            timeout=60,
            what="the tune to end",
            interval=0.2,
        )
        return tune, _trials(client, tune_id)


@pytest.mark.acceptance
@pytest.mark.parametrize("how", ["sigkill", "sigterm"])
def test_a_tune_resumes_after_a_stop_without_running_a_finished_trial_again(
    server_factory: ServerFactory, how: str
) -> None:
    server = server_factory(sim_lanes=2, max_attempts=3, shutdown_grace_s=0.5)
    server.start()
    with server.client() as client:
        tune_id = submit(client, _tune_body())["id"]

    if how == "sigkill":
        done_before = _stop_mid_study(server, tune_id, lambda: server.kill() == -9)
    else:
        done_before = _stop_mid_study(server, tune_id, lambda: server.stop(signal.SIGTERM))
    server.start()
    tune, trials = _finished_tune(server, tune_id)

    assert tune["state"] == "succeeded", tune["error"]
    assert tune["attempt"] == 1  # the restart was not one of its attempts
    assert len(trials) == TRIALS  # none submitted twice
    for trial in trials:
        assert trial["state"] == "succeeded"
        assert _runs(server, trial["id"]) == 1, trial  # each trial's run succeeded once
        if trial["id"] in done_before:
            assert trial["attempt"] == 1  # finished before the stop: never run again
    with server.client() as client:
        result = client.get(f"/v1/jobs/{tune_id}/result").json()
    assert [t["job_id"] for t in result["trials"]] == [t["id"] for t in trials]
    assert [t["state"] for t in result["trials"]] == ["complete"] * TRIALS
    assert result["best"]["value"] == max(t["value"] for t in result["trials"])
