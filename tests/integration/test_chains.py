"""Jobs that wait for others (`after`, `after_ok`), unique keys, and a training's chain
(`then`), through the API on the simulated runtime (in-memory store)."""

from __future__ import annotations

import asyncio

import httpx

from tests.conftest import wait_terminal
from tests.support.problems import assert_problem

SLOW = {"sim_seconds": 0.6}


def _sim(kind: str = "training", **fields: object) -> dict[str, object]:
    params = fields.pop("params", {"sim_seconds": 0.05})
    return {"kind": kind, "model": "sim", "params": params, **fields}


async def _submit(client: httpx.AsyncClient, body: dict[str, object]) -> dict[str, object]:
    response = await client.post("/v1/jobs", json=body)
    assert response.status_code == 202, response.text
    job: dict[str, object] = response.json()
    return job


async def test_a_job_after_another_waits_queued_then_runs_after_it(
    client: httpx.AsyncClient,
) -> None:
    first = await _submit(client, _sim(params=SLOW))
    second = await _submit(client, _sim(after=[first["id"]]))
    assert second["state"] == "queued"
    assert second["waiting"] is True

    done_second = await wait_terminal(client, str(second["id"]))
    done_first = await wait_terminal(client, str(first["id"]))
    assert done_second["state"] == "succeeded"
    assert done_second["waiting"] is False
    # It started only once the job it waited for had ended, though a lane was free.
    assert done_second["started_at"] >= done_first["finished_at"]


async def test_after_ok_cancels_the_waiting_job_when_its_dependency_fails(
    client: httpx.AsyncClient,
) -> None:
    failing = await _submit(client, _sim(params={"sim_seconds": 0.2, "sim_fail": "error"}))
    waiting = await _submit(client, _sim(after_ok=[failing["id"]]))
    plain = await _submit(client, _sim(after=[failing["id"]]))

    ended = await wait_terminal(client, str(waiting["id"]))
    assert ended["state"] == "cancelled"
    assert ended["error"]["code"] == "dependency_failed"
    assert ended["started_at"] is None
    # `after` waits for the end, whatever it was.
    assert (await wait_terminal(client, str(plain["id"])))["state"] == "succeeded"

    # Once the dependency has failed, a job asking for its success is refused at once.
    refused = await client.post("/v1/jobs", json=_sim(after_ok=[failing["id"]]))
    assert_problem(refused, 422, "dependency_failed")


async def test_an_unknown_dependency_is_refused_and_nothing_is_stored(
    client: httpx.AsyncClient,
) -> None:
    before = (await client.get("/v1/jobs")).json()["jobs"]
    refused = await client.post("/v1/jobs", json=_sim(after=["no-such-job"]))
    assert_problem(refused, 422, "dependency_not_found")
    assert (await client.get("/v1/jobs")).json()["jobs"] == before
    twice = await client.post("/v1/jobs", json=_sim(after=["a"], after_ok=["a"]))
    assert_problem(twice, 422, "invalid_request")


async def test_a_cancelled_dependency_cancels_after_ok_chains_transitively(
    client: httpx.AsyncClient,
) -> None:
    head = await _submit(client, _sim(params=SLOW))
    middle = await _submit(client, _sim(after_ok=[head["id"]]))
    last = await _submit(client, _sim(after_ok=[middle["id"]]))
    await client.post(f"/v1/jobs/{head['id']}/cancel")
    for job in (middle, last):
        ended = await wait_terminal(client, str(job["id"]))
        assert (ended["state"], ended["error"]["code"]) == ("cancelled", "dependency_failed")


async def test_a_unique_key_returns_the_queued_or_running_job(client: httpx.AsyncClient) -> None:
    first = await _submit(client, _sim(params=SLOW, unique_key="nightly"))
    again = await client.post("/v1/jobs", json=_sim(unique_key="nightly"))
    assert again.status_code == 202
    assert again.json()["id"] == first["id"]
    assert again.headers["Idempotent-Replayed"] == "true"

    await wait_terminal(client, str(first["id"]))
    # Once it has ended, the key makes a new job.
    later = await _submit(client, _sim(unique_key="nightly"))
    assert later["id"] != first["id"]
    # Outside its window, a queued job with the key does not count.
    short = await _submit(client, _sim(params=SLOW, unique_key="k2", unique_for_s=0.05))
    await asyncio.sleep(0.1)
    other = await _submit(client, _sim(unique_key="k2", unique_for_s=0.05))
    assert other["id"] != short["id"]


async def test_a_chain_runs_its_steps_in_order_as_jobs_of_their_own(
    client: httpx.AsyncClient,
) -> None:
    body = _sim(
        params={"sim_seconds": 0.05, "imgsz": 96},
        then={
            "validate": {"split": "val"},
            "export": {"formats": ["onnx", "torchscript"]},
        },
    )
    training = await _submit(client, body)
    assert training["chain_id"] == training["id"]

    chain_url = f"/v1/chains/{training['id']}"
    for _ in range(200):
        chain = (await client.get(chain_url)).json()
        if chain["state"] not in ("queued", "running"):
            break
        await wait_terminal(client, chain["steps"][-1]["id"])
    assert chain["state"] == "succeeded"
    kinds = [step["kind"] for step in chain["steps"]]
    assert kinds == ["training", "validation", "export", "export"]
    steps = chain["steps"]
    assert all(step["chain_id"] == training["id"] for step in steps)
    assert all(step["parent_id"] == training["id"] for step in steps[1:])
    assert chain["promoted"] is None
    # In order: each step started after the steps it waited for had ended.
    validation, exports = steps[1], steps[2:4]
    assert validation["started_at"] >= steps[0]["finished_at"]
    assert all(export["started_at"] >= validation["finished_at"] for export in exports)
    assert [export["params"]["format"] for export in exports] == ["onnx", "torchscript"]
    # At the training's size, unless the step names one.
    assert validation["params"]["imgsz"] == 96
    assert [export["params"]["imgsz"] for export in exports] == [96, 96]

    listed = (await client.get("/v1/jobs", params={"chain": training["id"]})).json()["jobs"]
    assert sorted(job["id"] for job in listed) == sorted(step["id"] for step in steps)


async def test_cancelling_a_chain_cancels_what_has_not_run(client: httpx.AsyncClient) -> None:
    body = _sim(params=SLOW, then={"validate": {}, "export": {"formats": ["onnx"]}})
    training = await _submit(client, body)
    cancelled = (await client.post(f"/v1/chains/{training['id']}/cancel")).json()
    for step in cancelled["steps"][1:]:
        assert step["state"] == "cancelled"
    ended = await wait_terminal(client, str(training["id"]))
    assert ended["state"] == "cancelled"
    chain = (await client.get(f"/v1/chains/{training['id']}")).json()
    assert chain["state"] == "cancelled"
    assert all(step["started_at"] is None for step in chain["steps"][1:])
    assert_problem(await client.get("/v1/chains/no-such-chain"), 404, "job_not_found")


async def test_a_gate_needs_a_validate_step_and_then_needs_a_step(
    client: httpx.AsyncClient,
) -> None:
    no_validate = _sim(then={"promote": {"alias": "det@prod", "gate": {"min": 0.5}}})
    assert_problem(await client.post("/v1/jobs", json=no_validate), 422, "invalid_request")
    assert_problem(await client.post("/v1/jobs", json=_sim(then={})), 422, "invalid_request")
    bad_alias = _sim(then={"promote": {"alias": "no-alias-here"}})
    assert_problem(await client.post("/v1/jobs", json=bad_alias), 422, "invalid_request")
    # The simulated model registers no model: no alias can point to what it trains.
    simulated = _sim(then={"validate": {}, "promote": {"alias": "det@prod"}})
    assert_problem(await client.post("/v1/jobs", json=simulated), 422, "invalid_input")
    assert (await client.get("/v1/jobs")).json()["jobs"] == []
