"""Tune jobs through the API on the simulated runtime (2 lanes, in-memory store): trials are
training jobs of their own, run two at a time, pruned by the pruner, cancelled with the tune.
The simulated training scores best at lr0 = SIM_BEST_LR0 (`runners/simulated.py`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx

from tests.conftest import serve, wait_terminal
from tests.support.problems import assert_problem
from yolo_orch.app import create_app
from yolo_orch.config import Settings


def _tune(**params: Any) -> dict[str, Any]:
    return {
        "kind": "tune",
        "model": "sim",
        "params": {
            "space": {"lr0": {"low": 0.0005, "high": 0.2, "log": True}},
            "trials": 4,
            "epochs": 4,
            "pruner": "none",
            "base": {"sim_seconds": 0.4, "sim_steps": 4},
            **params,
        },
    }


async def _submit(client: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    response = await client.post("/v1/jobs", json=body)
    assert response.status_code == 202, response.text
    job: dict[str, Any] = response.json()
    return job


async def _trials(client: httpx.AsyncClient, tune_id: str) -> list[dict[str, Any]]:
    response = await client.get("/v1/jobs", params={"chain": tune_id, "kind": "training"})
    jobs: list[dict[str, Any]] = response.json()["jobs"]
    return sorted(jobs, key=lambda job: job["created_at"])


def _at(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


async def test_a_tune_runs_its_trials_two_at_a_time_and_reports_the_best(
    client: httpx.AsyncClient,
) -> None:
    tune = await _submit(client, _tune())
    done = await wait_terminal(client, tune["id"], deadline_s=30)
    assert done["state"] == "succeeded", done["error"]

    trials = await _trials(client, tune["id"])
    assert len(trials) == 4
    assert all(t["parent_id"] == tune["id"] and t["state"] == "succeeded" for t in trials)
    # Two lanes, `parallel` defaulting to them: each trial overlaps another, never three at once.
    spans = [(_at(t["started_at"]), _at(t["finished_at"])) for t in trials]
    assert spans[0][0] < spans[1][1]
    assert spans[1][0] < spans[0][1]
    for moment, _ in spans:
        assert sum(start <= moment < end for start, end in spans) <= 2

    result = (await client.get(f"/v1/jobs/{tune['id']}/result")).json()
    assert [t["number"] for t in result["trials"]] == [0, 1, 2, 3]
    assert [t["job_id"] for t in result["trials"]] == [t["id"] for t in trials]
    # The first trial is the baseline: the base params' lr0 (the training default).
    assert result["trials"][0]["params"] == {"lr0": 0.01}
    best = result["best"]
    assert best["value"] == max(t["value"] for t in result["trials"])
    assert best["value"] >= result["trials"][0]["value"]
    assert done["result"]["best"]["number"] == best["number"]
    assert done["result"]["complete"] == 4


async def test_parallel_defaults_to_the_job_slots_not_the_lanes(
    settings_factory: Callable[..., Settings],
) -> None:
    settings = settings_factory(sim_lanes=1, slots_per_lane=2)
    async with serve(create_app(settings)) as client:
        tune = await _submit(client, _tune(trials=2))
        done = await wait_terminal(client, tune["id"], deadline_s=30)
        assert done["state"] == "succeeded", done["error"]
        first, second = await _trials(client, tune["id"])
    # One lane of two slots: the two trials ran at once.
    assert _at(second["started_at"]) < _at(first["finished_at"])


async def test_a_tunes_chain_runs_after_it_on_its_best_trial(client: httpx.AsyncClient) -> None:
    body = _tune(trials=2) | {"then": {"validate": {}, "export": {"formats": ["onnx"]}}}
    body["params"]["base"]["imgsz"] = 96
    tune = await _submit(client, body)
    done = await wait_terminal(client, tune["id"], deadline_s=30)
    assert done["state"] == "succeeded", done["error"]

    chain = (await client.get(f"/v1/chains/{tune['id']}")).json()
    steps = [step for step in chain["steps"] if step["kind"] in ("validation", "export")]
    assert [step["kind"] for step in steps] == ["validation", "export"]
    for step in steps:
        ended = await wait_terminal(client, step["id"])
        assert ended["state"] == "succeeded", ended["error"]
        assert ended["started_at"] >= done["finished_at"]
        assert ended["params"]["imgsz"] == 96  # the trials' size
    # The steps are not trials: the tune counted two.
    assert done["result"]["trials"] == 2


async def test_the_median_pruner_cancels_the_trials_it_prunes(
    client: httpx.AsyncClient,
) -> None:
    # One trial at a time, the first at the good base lr0: once one has completed, a trial of
    # the bad lr0 is below the median at its second epoch, and is pruned there.
    tune = await _submit(
        client,
        _tune(
            space={"lr0": {"choices": [0.02, 0.0006]}},
            trials=4,
            epochs=4,
            parallel=1,
            pruner="median",
            warmup_trials=1,
            warmup_epochs=2,
            seed=0,
            base={"lr0": 0.02, "sim_seconds": 2.0, "sim_steps": 4},
        ),
    )
    done = await wait_terminal(client, tune["id"], deadline_s=60)
    assert done["state"] == "succeeded", done["error"]
    result = (await client.get(f"/v1/jobs/{tune['id']}/result")).json()
    jobs = {job["id"]: job for job in await _trials(client, tune["id"])}
    states = [(t["params"]["lr0"], t["state"]) for t in result["trials"]]
    # The search as seed 0 makes it (the pruned trial's scores are below the complete ones').
    assert states == [
        (0.02, "complete"),
        (0.02, "complete"),
        (0.0006, "pruned"),
        (0.02, "complete"),
    ]
    pruned = result["trials"][2]
    # Pruned once the poll saw its second epoch (the third, on a slow machine), not at the end.
    assert pruned["pruned_at_epoch"] in (2, 3)
    assert pruned["value"] is not None
    assert jobs[pruned["job_id"]]["state"] == "cancelled"
    assert done["result"]["pruned"] == 1
    assert result["best"]["params"] == {"lr0": 0.02}


async def test_cancelling_a_tune_cancels_its_running_and_queued_trials(
    client: httpx.AsyncClient,
) -> None:
    tune = await _submit(client, _tune(base={"sim_seconds": 30, "sim_steps": 4}, parallel=3))
    async with asyncio.timeout(10):
        while len(trials := await _trials(client, tune["id"])) < 3 or not any(
            t["state"] == "running" for t in trials
        ):
            await asyncio.sleep(0.05)
    assert sorted(t["state"] for t in trials) == ["queued", "running", "running"]

    assert (await client.post(f"/v1/jobs/{tune['id']}/cancel")).status_code == 202
    done = await wait_terminal(client, tune["id"], deadline_s=10)
    assert done["state"] == "cancelled"
    for trial in trials:
        assert (await wait_terminal(client, trial["id"]))["state"] == "cancelled"
    assert len(await _trials(client, tune["id"])) == 3  # none submitted after the cancel


async def test_a_tune_none_of_whose_trials_completes_fails(client: httpx.AsyncClient) -> None:
    tune = await _submit(
        client, _tune(trials=2, base={"sim_seconds": 0.1, "sim_steps": 2, "sim_fail": "error"})
    )
    done = await wait_terminal(client, tune["id"], deadline_s=20)
    assert done["state"] == "failed"
    assert done["error"]["code"] == "no_trial_completed"


async def test_a_search_outside_the_training_params_is_refused(client: httpx.AsyncClient) -> None:
    for space, says in (
        ({"lr0": {"low": 0.001, "high": 2}}, "is not a valid lr0"),
        ({"momentum": {"low": 0.8, "high": 0.95}}, "not a training param"),
        ({"epochs": {"low": 1, "high": 5}}, "not a training param"),
        ({"batch": {"low": 4, "high": 16.5}}, "integers"),
        ({"optimizer": {"choices": ["SGD", "Lion"]}}, "is not a valid optimizer"),
    ):
        response = await client.post("/v1/jobs", json=_tune(space=space))
        assert_problem(response, 422, "invalid_request")
        assert says in response.text, response.text
    no_sim = _tune()
    no_sim["model"] = "yolo11n.yaml"
    response = await client.post("/v1/jobs", json=no_sim)
    assert_problem(response, 422, "invalid_request")
    assert "apply to model 'sim' only" in response.text or "dataset is required" in response.text
