"""Hostile input against a real `yolo-orch serve`, one case per class that an adversarial run
found: each is answered with its status and machine code, changes nothing, leaves the kept-alive
connection usable, and costs the server little memory. Then 50 of them at once, with a normal job
submitted and finished while they are in flight.

The memory classes (a PNG bomb, a YAML alias bomb, huge results, class-name floods) have their
own bounds in `test_hostile_limits.py`; the HTTP-level ones (oversized bodies and headers, bytes
that are not HTTP) in `tests/acceptance/test_http_edges.py`.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.hostile import PeakRss
from tests.support.servers import list_all_jobs
from yolo_orch.testing import Server, wait_terminal
from yolo_orch.testing.yolo import build_checkpoint, ensure_ultralytics, make_images

pytestmark = pytest.mark.acceptance

WALK_ENTRIES = 5_000
"""The server's `max_walk_entries` here."""
BIG_TREE = (50, 200)
"""Folders x files under `big/`: 10 000 entries, twice what one walk may visit."""
WIDE_TREE = (20, 200)
"""Under `wide/`: 4 000 entries, within the limit, none of them a match: a full walk each time."""
RSS_BOUND_MB = 64
"""What one hostile request may cost; the glob loop alone took 460 MB before it was bounded."""
JOB_TIMEOUT_S = 60.0
HOSTILE_AT_ONCE = 50


@dataclass
class Host:
    server: Server
    root: Path


def _tree(folder: Path, dirs: int, files: int) -> None:
    for d in range(dirs):
        sub = folder / f"d{d:03d}"
        sub.mkdir(parents=True)
        for f in range(files):
            os.close(os.open(sub / f"f{f:04d}.jpg", os.O_CREAT | os.O_WRONLY, 0o644))


def _datasets(root: Path) -> None:
    deep = root / "deep"
    deep.mkdir()
    (deep / "data.yaml").write_text("names: " + "[" * 50_000 + "]" * 50_000 + "\n")
    aliases = root / "aliases"
    aliases.mkdir()
    lines = ["a: &a [" + ", ".join(["x"] * 64) + "]"]
    for level in range(1, 8):
        lines.append(
            f"{'abcdefgh'[level]}: &{'abcdefgh'[level]} ["
            + ", ".join([f"*{'abcdefgh'[level - 1]}"] * 8)
            + "]"
        )
    lines.append("names: *h")
    (aliases / "data.yaml").write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    base = tmp_path_factory.mktemp("hostile")
    data, weights = base / "data", base / "weights"
    make_images(data / "images", 2)
    loop = data / "loop"
    make_images(loop, 1)
    (loop / "self").symlink_to(".", target_is_directory=True)
    (loop / "again").symlink_to("../loop", target_is_directory=True)
    _tree(data / "big", *BIG_TREE)
    _tree(data / "wide", *WIDE_TREE)
    _datasets(data)
    ensure_ultralytics(base)
    build_checkpoint(weights / "tiny.pt")
    server = Server(
        base / "var",
        base / "logs",
        "hostile",
        data_roots=json.dumps([str(data)]),
        model_roots=json.dumps([str(weights)]),
        max_walk_entries=WALK_ENTRIES,
        log_level="warning",
    )
    try:
        server.start()
        with server.client(timeout=120) as client:
            imported = client.post("/v1/models", json={"path": "tiny.pt", "name": "tiny"})
            assert imported.status_code == 201, imported.text
        yield Host(server, data)
    finally:
        server.cleanup()


def inference(*inputs: str, **params: object) -> dict[str, Any]:
    return {"kind": "inference", "model": "tiny", "inputs": list(inputs), "params": params}


def validation(dataset: str) -> dict[str, Any]:
    return {"kind": "validation", "model": "tiny", "dataset": dataset}


def cursor(value: str) -> str:
    return base64.urlsafe_b64encode(value.encode()).decode().rstrip("=")


LONG_NAME = "n" * 300 + ".jpg"
DEEP_PATH = "/".join(["d"] * 2_040) + "/x.jpg"

# (what, method, path, json body, expected status, expected code)
REFUSED: list[tuple[str, str, str, dict[str, Any] | None, int, str]] = [
    (
        "a walk past max_walk_entries",
        "POST",
        "/v1/jobs",
        inference("big/**/*.png"),
        422,
        "input_walk_too_large",
    ),
    ("a file name past NAME_MAX", "POST", "/v1/jobs", inference(LONG_NAME), 422, "path_too_long"),
    ("a path past PATH_MAX", "POST", "/v1/jobs", inference(DEEP_PATH), 422, "path_too_long"),
    (
        "an import path past NAME_MAX",
        "POST",
        "/v1/models",
        {"path": "w" * 300 + ".pt"},
        422,
        "path_too_long",
    ),
    (
        "a file used as a folder",
        "POST",
        "/v1/jobs",
        inference("images/img0.jpg/x.jpg"),
        422,
        "path_not_a_directory",
    ),
    (
        "a cursor past 64 bits",
        "GET",
        f"/v1/jobs?cursor={cursor('seq:' + str(2**70))}",
        None,
        422,
        "invalid_cursor",
    ),
    (
        "a data.yaml nested 50 000 deep",
        "POST",
        "/v1/jobs",
        validation("deep/data.yaml"),
        422,
        "invalid_dataset",
    ),
    (
        "YAML aliases that expand 8^7 times",
        "POST",
        "/v1/jobs",
        validation("aliases/data.yaml"),
        422,
        "invalid_dataset",
    ),
    (
        "max_det past its cap",
        "POST",
        "/v1/jobs",
        inference("images/*.jpg", max_det=10_000),
        422,
        "invalid_request",
    ),
    (
        "a class id past 64 bits",
        "POST",
        "/v1/jobs",
        inference("images/*.jpg", classes=[2**70]),
        422,
        "invalid_request",
    ),
]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [case[1:] for case in REFUSED],
    ids=[case[0] for case in REFUSED],
)
def test_hostile_input_is_refused_with_a_code_and_changes_nothing(
    host: Host, method: str, path: str, body: dict[str, Any] | None, status: int, code: str
) -> None:
    with host.server.client() as client:
        before = len(list_all_jobs(client))
        with PeakRss(host.server.pid) as memory:
            response = client.request(method, path, json=body)
        assert response.status_code == status, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        assert response.json()["code"] == code, response.text
        assert len(response.json()["detail"]) < 1_000  # offending names are cut short
        # The same kept-alive connection still serves: nothing was reset.
        assert client.get("/readyz").json()["status"] == "ready"
        assert len(list_all_jobs(client)) == before
    assert memory.growth_mb < RSS_BOUND_MB, f"RSS grew by {memory.growth_mb:.0f} MB"


def test_a_glob_through_symlink_loops_is_walked_once(host: Host) -> None:
    with host.server.client() as client, PeakRss(host.server.pid) as memory:
        response = client.post("/v1/jobs", json=inference("loop/**/*.jpg"))
        assert response.status_code == 202, response.text
        job = wait_terminal(client, response.json()["id"], JOB_TIMEOUT_S)
    assert job["state"] == "succeeded", job
    assert memory.growth_mb < RSS_BOUND_MB, f"RSS grew by {memory.growth_mb:.0f} MB"


HOSTILE_BODIES = [case[3] for case in REFUSED if case[2] == "/v1/jobs"]


def _hostile(url: str, index: int) -> int:
    """One of the 50: every other one a full walk of `wide/` that matches nothing; the rest
    cycle through the refused submissions above."""
    if index % 2 == 0:
        body = inference("wide/**/*.png")
    else:
        body = HOSTILE_BODIES[index // 2 % len(HOSTILE_BODIES)]
    with httpx.Client(base_url=url, timeout=120) as client:
        return client.post("/v1/jobs", json=body).status_code


def test_a_normal_job_is_served_while_50_hostile_requests_are_in_flight(host: Host) -> None:
    url = host.server.url
    with host.server.client(timeout=60) as client:
        started = time.monotonic()
        idle = client.post("/v1/jobs", json=inference("images/img0.jpg"))
        assert wait_terminal(client, idle.json()["id"], JOB_TIMEOUT_S)["state"] == "succeeded"
        idle_s = time.monotonic() - started

        pending = threading.Semaphore(0)
        answered: list[int] = []

        def hostile(index: int) -> None:
            pending.release()
            answered.append(_hostile(url, index))

        with ThreadPoolExecutor(HOSTILE_AT_ONCE) as pool:
            futures = [pool.submit(hostile, i) for i in range(HOSTILE_AT_ONCE)]
            for _ in range(HOSTILE_AT_ONCE):
                pending.acquire()  # every hostile request is on its way
            started = time.monotonic()
            normal = client.post("/v1/jobs", json=inference("images/img1.jpg"))
            assert normal.status_code == 202, normal.text
            job = wait_terminal(client, normal.json()["id"], JOB_TIMEOUT_S)
            loaded_s = time.monotonic() - started
            still_in_flight = HOSTILE_AT_ONCE - len(answered)
            for future in futures:
                future.result()

    assert job["state"] == "succeeded", job
    assert set(answered) == {422}, answered
    assert len(answered) == HOSTILE_AT_ONCE
    # A figure for the record, not an assertion: timings belong to benchmarks.
    print(
        f"normal job: {idle_s * 1000:.0f} ms idle, {loaded_s * 1000:.0f} ms with "
        f"{HOSTILE_AT_ONCE} hostile requests in flight ({still_in_flight} still unanswered "
        "when it finished)"
    )
