"""SIGKILL mid-stream, restart, then check the queue like Jepsen's total-queue checker: every
acknowledged job exists and ends, nothing appears that no client may have submitted, and no job
runs to success twice in one attempt."""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

import httpx
import pytest

from tests.acceptance.conftest import (
    TERMINAL,
    CheckFailed,
    Server,
    ServerFactory,
    list_all_jobs,
    require,
    sim_inference,
    sim_runs,
    sim_training,
    wait_for,
)
from yolo_orch.runners.simulated import BATCH_LOG

OPERATIONS = 200
KILL_AFTER_ACKS = 100
CLIENTS = 4
SUBMIT_TIMEOUT_S = 30.0


@dataclass
class Submission:
    """One POST /v1/jobs, tagged so the job it made can be recognised in the listing."""

    index: int
    body: dict[str, Any]
    outcome: Literal["pending", "acked", "refused", "unknown"] = "pending"
    """acked: 202 with an id. refused: an HTTP error, so no job. unknown: the connection broke
    after the request may have been sent: a job may or may not exist ("maybe-acked")."""
    job_id: str | None = None
    detail: str = ""

    @property
    def tag(self) -> str:
        return tag_of(self.body)


def tag_of(job: dict[str, Any]) -> str:
    tag = job["inputs"][0] if job["kind"] == "inference" else job["dataset"]
    require(isinstance(tag, str), f"a job without a tag: {job}")
    return str(tag)


def submission(index: int) -> Submission:
    """A mix of inference and training (some holding both lanes) at three priorities."""
    priority = index % 3 - 1
    params = {"sim_seconds": 0.05, "sim_steps": 2}
    if index % 5 == 0:
        gpus = 2 if index % 10 == 0 else 1
        body = sim_training(f"op-{index}/data.yaml", priority, gpus, **params)
    else:
        body = sim_inference(f"op-{index}.jpg", priority, **params)
    return Submission(index, body)


class Submitter:
    """Clients that send every submission once. A request the server never received (it could
    not connect) is sent again; one whose answer was lost is not, as a client cannot know."""

    def __init__(self, server: Server, submissions: list[Submission]) -> None:
        self._server = server
        self._todo = iter(submissions)
        self._lock = threading.Lock()
        self._acked_changed = threading.Condition(self._lock)
        self.acked = 0

    def run_client(self) -> None:
        deadline = time.monotonic() + SUBMIT_TIMEOUT_S
        with httpx.Client(base_url=self._server.url, timeout=5.0) as client:
            while (item := self._next()) is not None:
                self._send(client, item, deadline)

    def wait_acked(self, count: int, timeout: float) -> None:
        with self._acked_changed:
            if not self._acked_changed.wait_for(lambda: self.acked >= count, timeout):
                raise TimeoutError(f"only {self.acked} of {count} submissions acknowledged")

    def _next(self) -> Submission | None:
        with self._lock:
            return next(self._todo, None)

    def _send(self, client: httpx.Client, item: Submission, deadline: float) -> None:
        while True:
            try:
                response = client.post("/v1/jobs", json=item.body)
            except (httpx.ConnectError, httpx.ConnectTimeout):
                if time.monotonic() > deadline:
                    item.outcome, item.detail = "unknown", "the server did not come back"
                    return
                time.sleep(0.02)  # not sent: the server is down; try again
                continue
            except httpx.TransportError as exc:
                item.outcome, item.detail = "unknown", repr(exc)
                return
            break
        if response.status_code != 202:
            item.outcome, item.detail = "refused", f"{response.status_code} {response.text}"
            return
        with self._acked_changed:
            item.outcome, item.job_id = "acked", response.json()["id"]
            self.acked += 1
            self._acked_changed.notify_all()


@pytest.mark.acceptance
@pytest.mark.parametrize("batching", [False, True], ids=["alone", "batched"])
def test_sigkill_loses_no_acknowledged_job(
    server_factory: ServerFactory, executor_settings: dict[str, object], batching: bool
) -> None:
    # batched: queued inference jobs of one priority's params share forward passes of 8 images
    if batching and executor_settings["executor"] == "ray":
        pytest.skip("Ray lanes (`<node>/cuda:i`) take no batches: the unbatched run covers Ray")
    settings = {"batch_max_images": '{"sim": 8}'} if batching else {}
    server = server_factory(sim_lanes=2, max_attempts=3, **executor_settings, **settings)
    server.start()
    submissions = [submission(i) for i in range(OPERATIONS)]
    submitter = Submitter(server, submissions)

    with ThreadPoolExecutor(CLIENTS) as pool:
        clients = [pool.submit(submitter.run_client) for _ in range(CLIENTS)]
        submitter.wait_acked(KILL_AFTER_ACKS, timeout=SUBMIT_TIMEOUT_S)
        assert server.kill() == -9
        acked_before_kill = submitter.acked
        server.start()
        for future in clients:
            future.result(timeout=SUBMIT_TIMEOUT_S)

    outcomes = Counter(item.outcome for item in submissions)
    assert outcomes["pending"] == 0
    assert outcomes["refused"] == 0, [i.detail for i in submissions if i.outcome == "refused"]
    assert acked_before_kill < OPERATIONS, "the kill came after the last submission"
    assert outcomes["acked"] > acked_before_kill, "nothing was submitted after the restart"

    with server.client() as client:
        jobs = wait_for(
            lambda: (
                (jobs := list_all_jobs(client))
                and all(j["state"] in TERMINAL for j in jobs)
                and jobs
            ),
            timeout=30,
            what="every job to end",
            interval=0.2,
        )
    check_total_queue(server, submissions, jobs)
    shared = list(server.data_dir.glob(f"jobs/*/{BATCH_LOG}"))
    assert bool(shared) is batching, "batched runs shared no pass, or unbatched ones did"


def check_total_queue(
    server: Server, submissions: list[Submission], jobs: list[dict[str, Any]]
) -> None:
    by_tag = {item.tag: item for item in submissions}
    listed = {job["id"]: job for job in jobs}
    acked = {item.job_id: item for item in submissions if item.job_id is not None}

    missing = sorted(set(acked) - set(listed))
    require(missing == [], f"{len(missing)} acknowledged job(s) lost")

    tags = Counter(tag_of(job) for job in jobs)
    duplicated = sorted(tag for tag, count in tags.items() if count > 1)
    require(duplicated == [], f"one submission made several jobs: {duplicated}")

    unexpected = []
    for job_id, job in listed.items():
        item = by_tag.get(tag_of(job))
        if item is None:
            raise CheckFailed(f"job {job_id} matches no submission: {job}")
        if job_id in acked:
            require(acked[job_id] is item, f"job {job_id} answered another submission: {job}")
        elif item.outcome != "unknown":  # only a submission that got no answer may exist
            unexpected.append(job_id)
    require(unexpected == [], f"{len(unexpected)} job(s) that no client submitted")

    for job in jobs:
        if job["state"] == "failed":
            require(job["error"]["code"] == "interrupted", job)
            require(job["attempt"] == job["max_attempts"], job)
            continue
        require(job["state"] == "succeeded", job)
        runs = sim_runs(server.data_dir, job["id"])
        require(runs, f"job {job['id']} succeeded without a run: {job}")
        twice = len(runs) != len(set(runs))
        require(not twice, f"job {job['id']} succeeded twice in one attempt: {runs}")
        require(runs[-1] == job["attempt"], f"job {job['id']}: runs {runs}, job {job}")
