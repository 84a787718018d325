"""The client's pieces without a server: following a job over an event stream (drops,
reconnects, the polling fallback), the errors → exit codes mapping, waiting and downloading,
all through httpx.MockTransport."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from yolo_orch.client import ApiError, Client, ExitCode
from yolo_orch.client.follow import follow_events

# -- following a job


EVENT_STREAM = {"content-type": "text/event-stream; charset=utf-8"}


def _job(state: str, done: int = 0) -> dict[str, Any]:
    """A job as the server shows it."""
    return {
        "id": "j1",
        "kind": "inference",
        "state": state,
        "model": "sim",
        "params": {},
        "priority": 0,
        "gpus": 1,
        "devices": [],
        "attempt": 1,
        "max_attempts": 3,
        "cancel_requested": False,
        "progress": {"done": done, "total": 3, "unit": "steps"},
        "error": None,
        "result": None,
        "created_at": "2026-12-04T10:00:00Z",
        "started_at": None,
        "finished_at": None,
    }


def _sse(*jobs: dict[str, Any], first_id: int = 1) -> bytes:
    events = (
        f"id: {first_id + n}\nevent: {'progress' if n else 'state'}\ndata: {json.dumps(job)}\n\n"
        for n, job in enumerate(jobs)
    )
    return "".join(events).encode()


class _Dropping(httpx.SyncByteStream):
    """A response body that breaks off after `body`, as a dropped connection does."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def __iter__(self) -> Iterator[bytes]:
        yield self._body
        raise httpx.RemoteProtocolError("peer closed connection without sending complete body")


def _problem(status: int, code: str, detail: str = "nope", **headers: str) -> httpx.Response:
    body = {
        "type": f"urn:yolo-orch:problem:{code}",
        "status": status,
        "detail": detail,
        "code": code,
    }
    return httpx.Response(
        status, json=body, headers={"content-type": "application/problem+json", **headers}
    )


def _client(handler: Callable[[httpx.Request], httpx.Response], token: str | None = "") -> Client:
    return Client("http://test", token, transport=httpx.MockTransport(handler))


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def __call__(self) -> float:
        return self.now


def _follow(client: Client, clock: _Clock) -> list[str]:
    return [
        f"{event.job.state}:{event.job.progress.done if event.job.progress else 0}"
        for event in follow_events(client, "j1", sleep=clock.sleep, clock=clock)
    ]


def test_follow_reads_the_event_stream_until_a_terminal_state() -> None:
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        body = _sse(_job("queued"), _job("running", 1), _job("succeeded", 3), _job("running", 9))
        return httpx.Response(200, headers=EVENT_STREAM, content=body)

    clock = _Clock()
    assert _follow(_client(handler), clock) == ["queued:0", "running:1", "succeeded:3"]
    assert [r.url.path for r in requests] == ["/v1/jobs/j1/events"]
    assert requests[0].headers["accept"] == "text/event-stream"
    assert "last-event-id" not in requests[0].headers
    assert clock.sleeps == []


def test_follow_resumes_a_dropped_stream_with_last_event_id() -> None:
    seen_ids: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen_ids.append(request.headers.get("last-event-id"))
        if len(seen_ids) == 1:
            body = _sse(_job("queued"), _job("running", 1))
            return httpx.Response(200, headers=EVENT_STREAM, stream=_Dropping(body))
        if len(seen_ids) == 2:  # a restarting server
            raise httpx.ConnectError("connection refused")
        body = _sse(_job("running", 2), _job("failed", 2), first_id=3)
        return httpx.Response(200, headers=EVENT_STREAM, content=body)

    clock = _Clock()
    assert _follow(_client(handler), clock) == ["queued:0", "running:1", "running:2", "failed:2"]
    assert seen_ids == [None, "2", "2"]
    assert len(clock.sleeps) == 2


def test_follow_skips_comments_and_takes_the_servers_retry_delay() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls == 1:
            body = b": ping\n\nretry: 2000\n\n" + _sse(_job("running", 1))
            return httpx.Response(200, headers=EVENT_STREAM, stream=_Dropping(body))
        body = b": ping\r\n\r\nevent: other\ndata: not json\n\n" + _sse(_job("succeeded", 3))
        return httpx.Response(200, headers=EVENT_STREAM, content=body)

    clock = _Clock()
    assert _follow(_client(handler), clock) == ["running:1", "succeeded:3"]
    assert clock.sleeps == [2.0]


def test_follow_gives_up_when_the_server_stays_away() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls == 1:
            return httpx.Response(
                200, headers=EVENT_STREAM, stream=_Dropping(_sse(_job("running", 1)))
            )
        raise httpx.ConnectError("connection refused")

    clock = _Clock()
    with pytest.raises(ApiError) as caught:
        _follow(_client(handler), clock)

    assert caught.value.exit_code is ExitCode.UNAVAILABLE
    assert caught.value.code == "unreachable"
    assert 29 <= clock.now <= 31  # RECONNECT_BUDGET_S
    assert max(clock.sleeps) <= 5


def test_follow_fails_at_once_when_the_server_was_never_reached() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    clock = _Clock()
    with pytest.raises(ApiError) as caught:
        _follow(_client(handler), clock)

    assert caught.value.exit_code is ExitCode.UNAVAILABLE
    assert clock.sleeps == []


def test_follow_polls_when_the_server_has_no_event_stream() -> None:
    polls = iter([_job("queued"), _job("running", 1), _job("running", 1), _job("cancelled", 1)])
    paths: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.path)
        if request.url.path.endswith("/events"):
            return _problem(404, "not_found", "no route for GET /v1/jobs/j1/events")
        return httpx.Response(200, json=next(polls))

    clock = _Clock()
    assert _follow(_client(handler), clock) == ["queued:0", "running:1", "cancelled:1"]
    assert paths == ["/v1/jobs/j1/events"] + ["/v1/jobs/j1"] * 4
    assert clock.sleeps == [0.5, 0.5, 0.5]


def test_follow_of_an_unknown_job_is_not_found() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return _problem(404, "job_not_found", "no job with id 'j1'")

    with pytest.raises(ApiError) as caught:
        _follow(_client(handler), _Clock())

    assert caught.value.exit_code is ExitCode.NOT_FOUND
    assert str(caught.value) == "no job with id 'j1' (job_not_found)"


# -- errors and exit codes


@pytest.mark.parametrize(
    ("response", "exit_code", "code", "in_detail"),
    [
        (
            _problem(401, "unauthorized", "a bearer token is required"),
            ExitCode.AUTH,
            "unauthorized",
            "--token",
        ),
        (_problem(403, "forbidden", "this token may not"), ExitCode.AUTH, "forbidden", "may not"),
        (_problem(404, "model_not_found"), ExitCode.NOT_FOUND, "model_not_found", "nope"),
        (_problem(409, "job_finished"), ExitCode.USAGE, "job_finished", "nope"),
        (_problem(422, "invalid_request"), ExitCode.USAGE, "invalid_request", "nope"),
        (
            _problem(429, "queue_full", **{"Retry-After": "7"}),
            ExitCode.UNAVAILABLE,
            "queue_full",
            "retry after 7 s",
        ),
        (_problem(503, "shutting_down"), ExitCode.UNAVAILABLE, "shutting_down", "nope"),
        (
            httpx.Response(502, text="<html>bad gateway</html>"),
            ExitCode.UNAVAILABLE,
            "http_502",
            "HTTP 502 Bad Gateway",
        ),
    ],
)
def test_error_answers_map_to_exit_codes(
    response: httpx.Response, exit_code: ExitCode, code: str, in_detail: str
) -> None:
    with pytest.raises(ApiError) as caught:
        _client(lambda request: response).job("j1")

    assert caught.value.exit_code is exit_code
    assert caught.value.code == code
    assert in_detail in caught.value.detail


def test_the_token_is_sent_as_a_bearer_header() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"models": []})

    _client(handler, token="s3cret").models()
    _client(handler).models()

    assert seen[0].headers["authorization"] == "Bearer s3cret"
    assert "authorization" not in seen[1].headers


def test_ids_cannot_reach_another_route() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.raw_path.decode())
        return httpx.Response(200, json=_job("queued"))

    _client(handler).job("../models")

    assert seen == ["/v1/jobs/..%2Fmodels"]


# -- waiting and downloading


def test_wait_asks_the_server_to_hold_its_answer_until_the_job_ends() -> None:
    answers = iter([_job("queued"), _job("running", 2), _job("succeeded", 3)])
    prefers: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        prefers.append(request.headers.get("prefer"))
        return httpx.Response(200, json=next(answers))

    job = _client(handler).wait("j1", timeout_s=120)

    assert job.state == "succeeded"
    assert prefers == ["wait=30"] * 3  # WAIT_CHUNK_S each time, within the overall timeout


def test_download_to_a_folder_takes_the_servers_name_and_checks_the_digest(
    tmp_path: Path,
) -> None:
    payload = b"weights" * 1000
    digest = hashlib.sha256(payload).hexdigest()

    def handler(request: httpx.Request) -> httpx.Response:
        etag = f'"{"0" * 64}"' if "/variants/" in request.url.path else f'"{digest}"'
        headers = {"ETag": etag, "Content-Disposition": 'attachment; filename="../mine.pt"'}
        return httpx.Response(200, content=payload, headers=headers)

    client = _client(handler)
    written = client.download_model("mine", tmp_path)
    with pytest.raises(ApiError) as corrupted:
        client.download_variant("mine", "v1", tmp_path / "variant.onnx")

    assert written == tmp_path / "mine.pt"  # the name's last part only
    assert written.read_bytes() == payload
    assert corrupted.value.code == "digest_mismatch"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["mine.pt"]  # no partial file


# -- what --wait and a followed training job show


def test_summaries_name_the_registered_model_and_the_variants_size() -> None:
    from yolo_orch.client.shapes import Job
    from yolo_orch.client.summary import job_summary

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models/m1":
            return httpx.Response(200, json={"name": "coco8-n", "variants": []} | _MODEL)
        variant = {"size_bytes": 12_300_000, "id": "v1", "format": "onnx"}
        export = {"model_id": "m1", "variant_id": "v1", "format": "onnx", "variant": variant}
        return httpx.Response(200, json=export)

    client = _client(handler)
    metrics = {"precision": 0.9, "recall": 0.8, "mAP50": 0.71, "mAP50-95": 0.52}
    trained = Job.model_validate(
        _job("succeeded")
        | {"kind": "training", "result": {"model_id": "m1", "epochs": 3, "metrics": metrics}}
    )
    exported = Job.model_validate(
        _job("succeeded")
        | {"kind": "export", "result": {"model_id": "m1", "variant_id": "v1", "format": "onnx"}}
    )

    assert job_summary(trained, client) == [
        "3 epochs; registered model coco8-n (m1)",
        "best: mAP50 0.710, mAP50-95 0.520",
    ]
    assert job_summary(exported, client) == ["variant v1, format onnx, 12.3 MB"]


def test_an_inference_summary_counts_one_thing_in_the_singular() -> None:
    from yolo_orch.client.shapes import Job
    from yolo_orch.client.summary import job_summary

    client = _client(lambda request: httpx.Response(404))

    def summary(result: dict[str, int]) -> list[str]:
        job = Job.model_validate(_job("succeeded") | {"kind": "inference", "result": result})
        return job_summary(job, client)

    assert summary({"images": 1, "detections": 0}) == ["1 image, 0 detections"]
    assert summary({"images": 2, "maps": 1}) == ["2 images, 1 map"]
    assert summary({"images": 3, "classified": 1}) == ["3 images, 1 classified"]


_MODEL = {
    "id": "m1",
    "sha256": "0" * 64,
    "size_bytes": 1,
    "task": "detect",
    "class_names": ["a"],
    "source": "upload",
    "created_at": "2026-12-04T10:00:00Z",
    "usable": True,
}


def test_training_progress_shows_the_epoch_loss_and_last_scores() -> None:
    from yolo_orch.client.shapes import Job
    from yolo_orch.client.summary import completed_epochs, training_status

    detail = {"epoch": 3, "epochs": 50, "batch": 7, "batches": 20}
    loss = {"box_loss": 0.5, "cls_loss": 0.25, "dfl_loss": 0.484}
    job = Job.model_validate(
        _job("running")
        | {
            "kind": "training",
            "progress": {
                "done": 47,
                "total": 1000,
                "unit": "batches",
                "detail": detail | {"loss": loss},
            },
        }
    )
    history = [{"epoch": 2, "mAP50": 0.4123, "mAP50-95": 0.25, "precision": 0.5}]

    assert completed_epochs(job) == 2
    assert training_status(job, history) == "epoch 3/50, loss 1.234, mAP50 0.412, mAP50-95 0.250"
