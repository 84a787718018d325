"""The HTTP API through the app's real lifespan (in-memory store, simulated runtime)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import fastapi.routing
import httpx
import pytest

from tests.conftest import serve, sim_job, wait_terminal
from tests.support.problems import assert_problem, wait_state
from tests.support.sse import parse_sse
from yolo_orch.app import create_app
from yolo_orch.config import Settings


async def test_health_and_readiness(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["status"] == "ready"
    assert all(ready.json()["checks"].values())


async def test_submit_poll_and_result(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/jobs", json=sim_job())
    assert response.status_code == 202
    job = response.json()
    assert response.headers["Location"] == f"/v1/jobs/{job['id']}"
    assert job["state"] in {"queued", "running"}
    assert job["inputs"] == ["a.jpg", "b.jpg"]
    assert job["params"]["imgsz"] == 640

    done = await wait_terminal(client, job["id"])
    assert done["state"] == "succeeded"
    assert done["attempt"] == 1
    assert done["devices"] in (["sim:0"], ["sim:1"])
    assert done["progress"] == {"done": 2, "total": 2, "unit": "steps", "detail": None}
    assert done["result"]["images"] == 2
    assert done["started_at"]
    assert done["finished_at"]

    result = (await client.get(f"/v1/jobs/{job['id']}/result")).json()
    assert [image["source"] for image in result["images"]] == ["a.jpg", "b.jpg"]
    for image in result["images"]:
        for detection in image["detections"]:
            assert set(detection) == {"class_id", "class_name", "confidence", "box"}
            assert set(detection["box"]) == {"x1", "y1", "x2", "y2"}


async def test_training_holds_all_its_lanes(client: httpx.AsyncClient) -> None:
    body = {"kind": "training", "model": "sim", "gpus": 2, "params": {"sim_seconds": 0.05}}
    job = (await client.post("/v1/jobs", json=body)).json()
    done = await wait_terminal(client, job["id"])
    assert done["state"] == "succeeded"
    assert done["devices"] == ["sim:0", "sim:1"]
    assert set(done["result"]["metrics"]) == {"precision", "recall", "mAP50", "mAP50-95"}


async def test_result_before_success_is_a_conflict(client: httpx.AsyncClient) -> None:
    job = (await client.post("/v1/jobs", json=sim_job(params={"sim_seconds": 5}))).json()
    assert_problem(await client.get(f"/v1/jobs/{job['id']}/result"), 409, "result_not_ready")
    await client.post(f"/v1/jobs/{job['id']}/cancel")


RESULT_ROUTES = ("result", "result?offset=0", "result?entry=0")


@pytest.mark.parametrize("route", RESULT_ROUTES)
async def test_a_cancelled_job_has_no_result_rather_than_one_not_ready(
    client: httpx.AsyncClient, route: str
) -> None:
    job = (await client.post("/v1/jobs", json=sim_job(params={"sim_seconds": 5}))).json()
    await client.post(f"/v1/jobs/{job['id']}/cancel")
    assert (await wait_terminal(client, job["id"]))["state"] == "cancelled"

    refused = assert_problem(await client.get(f"/v1/jobs/{job['id']}/{route}"), 409, "no_result")
    assert refused["detail"] == f"job {job['id']} was cancelled: it has no result"


@pytest.mark.parametrize("route", RESULT_ROUTES)
async def test_a_failed_job_has_no_result_and_points_at_its_error(
    client: httpx.AsyncClient, route: str
) -> None:
    job = (await client.post("/v1/jobs", json=sim_job(params={"sim_fail": "error"}))).json()
    assert (await wait_terminal(client, job["id"]))["state"] == "failed"

    refused = assert_problem(await client.get(f"/v1/jobs/{job['id']}/{route}"), 409, "no_result")
    assert refused["detail"] == f"job {job['id']} failed: see its error"


@pytest.mark.parametrize(("fail", "code"), [("error", "runtime_error"), ("oom", "cuda_oom")])
async def test_failed_runs_are_classified_and_the_server_goes_on(
    client: httpx.AsyncClient, fail: str, code: str
) -> None:
    bad = (await client.post("/v1/jobs", json=sim_job(params={"sim_fail": fail}))).json()
    failed = await wait_terminal(client, bad["id"])
    assert failed["state"] == "failed"
    assert failed["error"]["code"] == code
    good = (await client.post("/v1/jobs", json=sim_job())).json()
    assert (await wait_terminal(client, good["id"]))["state"] == "succeeded"


async def test_unknown_job_and_route_are_problems(client: httpx.AsyncClient) -> None:
    assert_problem(await client.get("/v1/jobs/nope"), 404, "job_not_found")
    assert_problem(await client.post("/v1/jobs/nope/cancel"), 404, "job_not_found")
    assert_problem(await client.get("/v1/jobs/nope/result"), 404, "job_not_found")
    assert_problem(await client.get("/v2/nothing"), 404, "not_found")
    assert_problem(await client.delete("/v1/jobs"), 405, "method_not_allowed")


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"kind": "inference", "model": "sim"},
        {"kind": "inference", "model": "sim", "inputs": []},
        {"kind": "painting", "model": "sim", "inputs": ["a"]},
        {"kind": "inference", "model": "sim", "inputs": ["a"], "params": {"conf": 2}},
        {"kind": "inference", "model": "sim", "inputs": ["a"], "params": {"colour": "red"}},
        {"kind": "inference", "model": "yolo11n", "inputs": ["a"], "params": {"sim_steps": 3}},
        {"kind": "training", "model": "yolo11n.yaml"},
        {"kind": "training", "model": "sim", "gpus": 0},
        {"kind": "inference", "model": "sim", "inputs": ["a"], "priority": 1000},
    ],
)
async def test_invalid_submissions_are_refused_and_store_nothing(
    client: httpx.AsyncClient, body: dict[str, Any]
) -> None:
    problem = assert_problem(await client.post("/v1/jobs", json=body), 422, "invalid_request")
    assert problem["errors"]
    assert (await client.get("/v1/jobs")).json()["jobs"] == []


async def test_malformed_json_is_a_problem(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/jobs", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert_problem(response, 422, "invalid_request")


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
async def test_a_job_not_sent_as_json_is_415(
    client: httpx.AsyncClient, content_type: str | None
) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    response = await client.post("/v1/jobs", content=json.dumps(sim_job()), headers=headers)
    assert_problem(response, 415, "unsupported_media_type")
    assert (await client.get("/v1/jobs")).json()["jobs"] == []
    as_json = {"content-type": "application/json; charset=utf-8"}
    response = await client.post("/v1/jobs", content=json.dumps(sim_job()), headers=as_json)
    assert response.status_code == 202, response.text


async def test_unknown_model_is_refused_at_submission(client: httpx.AsyncClient) -> None:
    body = {"kind": "inference", "model": "yolo11n", "inputs": ["a.jpg"]}
    problem = assert_problem(await client.post("/v1/jobs", json=body), 404, "model_not_found")
    assert "model not found" in problem["detail"]
    assert "no model is registered yet" in problem["detail"]
    assert (await client.get("/v1/jobs")).json()["jobs"] == []


async def test_more_gpus_than_lanes_is_refused(client: httpx.AsyncClient) -> None:
    body = {"kind": "training", "model": "sim", "gpus": 3}
    problem = assert_problem(await client.post("/v1/jobs", json=body), 422, "too_many_gpus")
    assert problem["detail"] == "the job asks for 3 GPUs; this host has 2 lane(s)"


async def test_two_gpus_on_a_one_lane_host_say_this_host_not_node(
    settings_factory: Callable[..., Settings],
) -> None:
    async with serve(create_app(settings_factory(sim_lanes=1))) as client:
        body = {"kind": "training", "model": "sim", "gpus": 2}
        problem = assert_problem(await client.post("/v1/jobs", json=body), 422, "too_many_gpus")
    assert "this host has 1 lane(s)" in problem["detail"]
    assert "node" not in problem["detail"]


async def test_idempotency_key_returns_the_same_job(client: httpx.AsyncClient) -> None:
    headers = {"Idempotency-Key": "order-42"}
    first = await client.post("/v1/jobs", json=sim_job(), headers=headers)
    again = await client.post("/v1/jobs", json=sim_job(), headers=headers)
    assert first.status_code == again.status_code == 202
    assert again.json()["id"] == first.json()["id"]
    assert again.headers["Idempotent-Replayed"] == "true"
    other = await client.post("/v1/jobs", json=sim_job(inputs=["c.jpg"]), headers=headers)
    assert_problem(other, 422, "idempotency_key_reused")


async def test_concurrent_retries_with_one_key_make_one_job(client: httpx.AsyncClient) -> None:
    responses = await asyncio.gather(
        *(
            client.post("/v1/jobs", json=sim_job(), headers={"Idempotency-Key": "k"})
            for _ in range(50)
        )
    )
    assert {response.status_code for response in responses} == {202}
    assert len({response.json()["id"] for response in responses}) == 1
    assert len((await client.get("/v1/jobs")).json()["jobs"]) == 1


async def test_full_queue_answers_429_and_stores_nothing(
    settings_factory: Callable[..., Settings],
) -> None:
    async with serve(create_app(settings_factory(max_queued=2, sim_lanes=1))) as client:
        long = sim_job(params={"sim_seconds": 30})
        running = (await client.post("/v1/jobs", json=long)).json()
        await wait_state(client, running["id"], "running")
        for _ in range(2):
            assert (await client.post("/v1/jobs", json=long)).status_code == 202
        refused = await client.post("/v1/jobs", json=long)
        assert_problem(refused, 429, "queue_full")
        assert int(refused.headers["Retry-After"]) >= 1
        assert len((await client.get("/v1/jobs")).json()["jobs"]) == 3
        for job in (await client.get("/v1/jobs")).json()["jobs"]:
            await client.post(f"/v1/jobs/{job['id']}/cancel")


async def test_retry_after_is_the_wait_behind_the_running_job(
    settings_factory: Callable[..., Settings],
) -> None:
    # No run has finished yet, so recent run times say nothing; the running job's progress
    # does: one step of 600 took at least a second.
    async with serve(create_app(settings_factory(max_queued=1, sim_lanes=1))) as client:
        long = sim_job(params={"sim_seconds": 600, "sim_steps": 600})
        running = (await client.post("/v1/jobs", json=long)).json()
        async with asyncio.timeout(10):
            while not (await client.get(f"/v1/jobs/{running['id']}")).json()["progress"]:
                await asyncio.sleep(0.02)
        queued = (await client.post("/v1/jobs", json=long)).json()
        refused = await client.post("/v1/jobs", json=long)
        assert_problem(refused, 429, "queue_full")
        assert int(refused.headers["Retry-After"]) >= 599
        for job in (running, queued):
            await client.post(f"/v1/jobs/{job['id']}/cancel")


async def test_cancel_queued_running_and_finished(
    settings_factory: Callable[..., Settings],
) -> None:
    async with serve(create_app(settings_factory(sim_lanes=1))) as client:
        slow = sim_job(params={"sim_seconds": 20, "sim_steps": 400})
        running = (await client.post("/v1/jobs", json=slow)).json()
        queued = (await client.post("/v1/jobs", json=slow)).json()
        await wait_state(client, running["id"], "running")

        response = await client.post(f"/v1/jobs/{queued['id']}/cancel")
        assert response.status_code == 200
        assert response.json()["state"] == "cancelled"

        response = await client.post(f"/v1/jobs/{running['id']}/cancel")
        assert response.status_code == 202
        assert response.json()["cancel_requested"] is True
        cancelled = await wait_terminal(client, running["id"])
        assert cancelled["state"] == "cancelled"
        assert (cancelled["progress"] or {"done": 0})["done"] < 400

        again = await client.post(f"/v1/jobs/{running['id']}/cancel")
        assert_problem(again, 409, "job_finished")


async def test_list_filters_and_paginates(client: httpx.AsyncClient) -> None:
    ids = []
    for _ in range(5):
        ids.append((await client.post("/v1/jobs", json=sim_job())).json()["id"])
    training = await client.post("/v1/jobs", json={"kind": "training", "model": "sim"})
    ids.append(training.json()["id"])

    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2}
        if cursor:
            params["cursor"] = cursor
        page = (await client.get("/v1/jobs", params=params)).json()
        seen += [job["id"] for job in page["jobs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list(reversed(ids))

    only_training = (await client.get("/v1/jobs", params={"kind": "training"})).json()
    assert [job["id"] for job in only_training["jobs"]] == [ids[-1]]
    for job_id in ids:
        await wait_terminal(client, job_id)
    done = (await client.get("/v1/jobs", params={"state": ["succeeded", "failed"]})).json()
    assert len(done["jobs"]) == 6
    assert (await client.get("/v1/jobs", params={"state": "queued"})).json()["jobs"] == []
    assert_problem(await client.get("/v1/jobs", params={"cursor": "bogus"}), 422, "invalid_cursor")
    assert_problem(await client.get("/v1/jobs", params={"state": "lost"}), 422, "invalid_request")


async def test_healthz_answers_while_every_lane_is_busy(client: httpx.AsyncClient) -> None:
    """Not timed: the probes must all be answered while both jobs are still running, which
    cannot happen if a run held the event loop."""
    slow = sim_job(params={"sim_seconds": 30, "sim_steps": 3000})
    jobs = [(await client.post("/v1/jobs", json=slow)).json() for _ in range(2)]
    for job in jobs:
        await wait_state(client, job["id"], "running")
    for _ in range(20):
        assert (await client.get("/healthz")).status_code == 200
    for job in jobs:
        assert (await client.get(f"/v1/jobs/{job['id']}")).json()["state"] == "running"
        await client.post(f"/v1/jobs/{job['id']}/cancel")


async def test_draining_refuses_new_jobs_but_answers_polls(
    settings_factory: Callable[..., Settings],
) -> None:
    app = create_app(settings_factory())
    async with serve(app) as client:
        job = (await client.post("/v1/jobs", json=sim_job())).json()
        app.state.services.jobs.draining = True
        assert_problem(await client.post("/v1/jobs", json=sim_job()), 503, "shutting_down")
        assert (await client.get(f"/v1/jobs/{job['id']}")).status_code == 200
        assert (await client.get("/readyz")).status_code == 503


async def test_openapi_documents_the_job_routes(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    assert {
        "/v1/jobs",
        "/v1/jobs/{job_id}",
        "/v1/jobs/{job_id}/cancel",
        "/v1/jobs/{job_id}/result",
        "/healthz",
        "/readyz",
    } <= set(schema["paths"])
    submit = schema["paths"]["/v1/jobs"]["post"]
    assert {"202", "404", "409", "422", "429", "503"} <= set(submit["responses"])
    assert set(submit["responses"]["202"]["headers"]) == {"Location", "Idempotent-Replayed"}
    assert set(submit["responses"]["200"]["headers"]) == {"Preference-Applied"}
    for status in ("429", "503"):
        assert set(submit["responses"][status]["headers"]) == {"Retry-After"}


async def test_events_follow_a_job_to_its_end(client: httpx.AsyncClient) -> None:
    job = (await client.post("/v1/jobs", json=sim_job(params={"sim_steps": 4}))).json()
    response = await client.get(f"/v1/jobs/{job['id']}/events")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(response.text)
    states = [event["data"]["state"] for event in events if event["event"] == "state"]
    assert states[-1] == "succeeded"
    assert states == sorted(set(states), key=states.index)  # each state once, in order
    assert [int(event["id"]) for event in events] == sorted(int(e["id"]) for e in events)
    assert events[-1]["data"]["result"]["images"] == 2

    again = await client.get(
        f"/v1/jobs/{job['id']}/events", headers={"Last-Event-ID": events[-1]["id"]}
    )
    finished = parse_sse(again.text)
    assert [event["data"]["state"] for event in finished] == ["succeeded"]


async def test_events_keep_a_quiet_stream_alive_with_comments(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # FastAPI's keep-alive period (15 s), shortened so that a short job sees some.
    monkeypatch.setattr(fastapi.routing, "_PING_INTERVAL", 0.05)
    job = await client.post("/v1/jobs", json=sim_job(params={"sim_seconds": 1, "sim_steps": 1}))
    response = await client.get(f"/v1/jobs/{job.json()['id']}/events")

    assert ": ping" in response.text.splitlines()
    events = parse_sse(response.text)
    assert [event["data"]["state"] for event in events if event["event"] == "state"][-1] == (
        "succeeded"
    )


async def test_events_of_an_unknown_job_are_a_problem(client: httpx.AsyncClient) -> None:
    assert_problem(await client.get("/v1/jobs/nope/events"), 404, "job_not_found")


async def test_metrics_count_jobs_lanes_runs_and_refusals(
    settings_factory: Callable[..., Settings],
) -> None:
    async with serve(create_app(settings_factory(max_queued=1, sim_lanes=1))) as client:
        done = (await client.post("/v1/jobs", json=sim_job())).json()
        await wait_terminal(client, done["id"])
        long = sim_job(params={"sim_seconds": 30})
        running = (await client.post("/v1/jobs", json=long)).json()
        await wait_state(client, running["id"], "running")
        assert (await client.post("/v1/jobs", json=long)).status_code == 202
        assert (await client.post("/v1/jobs", json=long)).status_code == 429

        response = await client.get("/metrics")
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain")
        text = response.text
        for line in (
            'yolo_orch_jobs{kind="inference",state="succeeded"} 1.0',
            'yolo_orch_jobs{kind="inference",state="running"} 1.0',
            "yolo_orch_queue_depth 1.0",
            'yolo_orch_lane_busy{lane="sim:0"} 1.0',
            'yolo_orch_lane_slots{lane="sim:0"} 1.0',
            "yolo_orch_rejected_submissions_total 1.0",
            'yolo_orch_job_duration_seconds_count{kind="inference",state="succeeded"} 1.0',
            "yolo_orch_model_cache_misses_total 0.0",
        ):
            assert line in text, line
        for job in (await client.get("/v1/jobs")).json()["jobs"]:
            await client.post(f"/v1/jobs/{job['id']}/cancel")


async def test_each_job_keeps_its_log_lines(client: httpx.AsyncClient) -> None:
    ok = (await client.post("/v1/jobs", json=sim_job())).json()
    bad = (await client.post("/v1/jobs", json=sim_job(params={"sim_fail": "error"}))).json()
    for job in (ok, bad):
        await wait_terminal(client, job["id"])
    ok_log = (await client.get(f"/v1/jobs/{ok['id']}/logs")).text
    assert "queued" in ok_log
    assert "started on sim:" in ok_log
    assert ok_log.rstrip().endswith("succeeded")
    assert bad["id"] not in ok_log
    bad_log = (await client.get(f"/v1/jobs/{bad['id']}/logs")).text
    assert "simulated failure" in bad_log
    assert_problem(await client.get("/v1/jobs/nope/logs"), 404, "job_not_found")


async def test_uploads_are_bounded_by_max_files_per_job(
    settings_factory: Callable[..., Settings],
) -> None:
    async with serve(create_app(settings_factory(max_files_per_job=2))) as client:
        image = ("images", ("a.jpg", b"x", "image/jpeg"))
        too_many = await client.post("/v1/jobs/inference", data={"model": "sim"}, files=[image] * 3)
        assert_problem(too_many, 422, "too_many_files")
        no_model = await client.post("/v1/jobs/inference", files=[image])
        assert_problem(no_model, 422, "invalid_request")
        extra = await client.post(
            "/v1/jobs/inference", data={"model": "sim", "colour": "red"}, files=[image]
        )
        assert_problem(extra, 422, "invalid_request")
        ok = await client.post("/v1/jobs/inference", data={"model": "sim"}, files=[image] * 2)
        assert ok.status_code == 202
        assert ok.json()["inputs"] == ["a.jpg", "a.jpg"]


async def test_head_answers_every_get_route_like_get_without_a_body(
    client: httpx.AsyncClient,
) -> None:
    job = (await client.post("/v1/jobs", json=sim_job())).json()
    await wait_terminal(client, job["id"])
    spec = (await client.get("/openapi.json")).json()
    values = {
        "job_id": job["id"],
        "ref": "nope",
        "name": "nope",
        "alias": "nope",
        "chain_id": "nope",
        "index": 0,
        "variant_id": "x",
        "item": "nope",
        "dataset": "nope",
    }
    paths = [
        path.format(**values)
        for path, operations in spec["paths"].items()
        if "get" in operations and path != "/v1/events"  # a stream that never ends
    ]
    assert len(paths) > 10, paths
    for path in [*paths, "/docs", "/redoc", "/v1/jobs/nope"]:
        get = await client.get(path)
        head = await client.head(path)
        assert head.status_code == get.status_code, path
        assert head.content == b"", path
        varying = {"content-length"} if path == "/metrics" else set()
        assert _headers_but(head, varying) == _headers_but(get, varying), path


def _headers_but(response: httpx.Response, names: set[str]) -> dict[str, str]:
    return {key: value for key, value in response.headers.items() if key not in names}


async def test_method_not_allowed_names_head_where_get_is(client: httpx.AsyncClient) -> None:
    refused = await client.put("/v1/jobs")
    assert_problem(refused, 405, "method_not_allowed")
    assert refused.headers["Allow"] == "GET, HEAD, POST"
    cancel = await client.head("/v1/jobs/nope/cancel")
    assert cancel.status_code == 405
    assert cancel.headers["Allow"] == "POST"
