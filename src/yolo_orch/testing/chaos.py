"""The crash harness: cycles of submitting jobs while the server is killed with SIGKILL at a random
moment and restarted, then the whole queue checked like Jepsen's total-queue checker (every
acknowledged job present and terminal, none that no client submitted, none that ran to success
twice in one attempt). `python -m bench.chaos` runs it long; tests/proof/test_chaos.py short, and
tests/acceptance/test_crash_recovery.py uses its submissions and checker around one kill.

The checks are `require` calls, not `assert`s, so that `python -O` keeps them.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from yolo_orch.testing.jobs import (
    TERMINAL_STATES,
    list_jobs,
    sim_inference,
    sim_runs,
    sim_training,
    wait_all_terminal,
)
from yolo_orch.testing.server import CheckFailed, Server, require

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
    not connect, or a standby head had no active one to send it to: 503 `not_active_head`) is
    sent again; one whose answer was lost is not, as a client cannot know.

    `urls`: the heads, when several share a PostgreSQL database; client `i` sends to
    `urls[i % len(urls)]` and follows a standby's 307 to the active head."""

    def __init__(
        self,
        server: Server,
        submissions: list[Submission],
        urls: Sequence[str] = (),
        pace_s: float = 0.0,
    ) -> None:
        self._urls = list(urls) or [server.url]
        self._pace_s = pace_s
        """Each client's pause after each submission (0: as fast as the server answers)."""
        self._todo = iter(submissions)
        self._lock = threading.Lock()
        self._acked_changed = threading.Condition(self._lock)
        self._clients = itertools.count()
        self._stopped = False
        self.acked = 0

    def stop(self) -> None:
        """The clients send nothing more once their request under way is answered."""
        with self._lock:
            self._stopped = True

    def run_client(self) -> None:
        url = self._urls[next(self._clients) % len(self._urls)]
        with httpx.Client(base_url=url, timeout=5.0, follow_redirects=True) as client:
            while (item := self._next()) is not None:
                self._send(client, item, time.monotonic() + SUBMIT_TIMEOUT_S)
                time.sleep(self._pace_s)

    def wait_acked(self, count: int, timeout: float) -> None:
        with self._acked_changed:
            if not self._acked_changed.wait_for(lambda: self.acked >= count, timeout):
                raise TimeoutError(f"only {self.acked} of {count} submissions acknowledged")

    def _next(self) -> Submission | None:
        with self._lock:
            return None if self._stopped else next(self._todo, None)

    def _send(self, client: httpx.Client, item: Submission, deadline: float) -> None:
        while True:
            try:
                response = client.post("/v1/jobs", json=item.body)
            except (httpx.ConnectError, httpx.ConnectTimeout):
                response = None  # not sent: the server is down
            except httpx.TransportError as exc:
                item.outcome, item.detail = "unknown", repr(exc)
                return
            if response is None or _no_active_head(response):
                if time.monotonic() > deadline:
                    item.outcome, item.detail = "unknown", "the server did not come back"
                    return
                time.sleep(0.02)  # try again
                continue
            break
        if response.status_code != 202:
            item.outcome, item.detail = "refused", f"{response.status_code} {response.text}"
            return
        with self._acked_changed:
            item.outcome, item.job_id = "acked", response.json()["id"]
            self.acked += 1
            self._acked_changed.notify_all()


def _no_active_head(response: httpx.Response) -> bool:
    return response.status_code == 503 and b"not_active_head" in response.content


@dataclass
class ChaosReport:
    cycles: int
    submissions: int
    outcomes: Counter[str] = field(default_factory=Counter)
    states: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    kills: int = 0
    acked_at_kill: list[int] = field(default_factory=list)
    """Per cycle: submissions of that cycle acknowledged when the kill came."""
    running_at_kill: int = 0
    """Cycles whose kill found at least one job running (the latest poll before it)."""
    seconds: float = 0.0
    drain_seconds: float = 0.0


def run_chaos(
    data_dir: Path,
    log_dir: Path,
    *,
    cycles: int,
    jobs: int,
    clients: int = 4,
    seed: int = 1,
    max_kill_delay_s: float = 1.5,
    drain_timeout_s: float = 600,
    **settings: object,
) -> tuple[ChaosReport, Server]:
    """Run the cycles, then check the queue (raises `CheckFailed`, an AssertionError, on a
    violation; the checks are calls, not `assert`s, so `python -O` keeps them). Returns the
    report and the server (stopped)."""
    rng = random.Random(seed)
    server = Server(
        data_dir,
        log_dir,
        "chaos",
        sim_lanes=2,
        max_attempts=3,
        max_queued=cycles * jobs + 100,
        log_level="warning",
        **settings,
    )
    started = time.monotonic()
    report = ChaosReport(cycles, cycles * jobs)
    submissions: list[Submission] = []
    server.start()
    try:
        for cycle in range(cycles):
            batch = [submission(cycle * jobs + i) for i in range(jobs)]
            submissions.extend(batch)
            submitter = Submitter(server, batch)
            with ThreadPoolExecutor(clients) as pool:
                futures = [pool.submit(submitter.run_client) for _ in range(clients)]
                time.sleep(rng.uniform(0, max_kill_delay_s))
                report.running_at_kill += _any_running(server)
                report.acked_at_kill.append(submitter.acked)
                code = server.kill()
                require(code == -9, f"the server had exited ({code}) before the kill")
                report.kills += 1
                server.start()
                for future in futures:
                    future.result(timeout=120)

        drain_started = time.monotonic()
        with server.client(timeout=30) as client:
            listed = _wait_all_terminal(client, drain_timeout_s)
        report.drain_seconds = time.monotonic() - drain_started
        report.outcomes = Counter(item.outcome for item in submissions)
        report.states = Counter(str(job["state"]) for job in listed)
        report.errors = Counter(
            str(job["error"]["code"]) for job in listed if job["state"] == "failed"
        )
        report.seconds = time.monotonic() - started
        pending = [item.index for item in submissions if item.outcome == "pending"]
        require(pending == [], f"submissions never sent: {pending[:10]}")
        check_total_queue(server, submissions, listed)
    finally:
        if server.running:
            server.stop()
    return report, server


def _any_running(server: Server) -> bool:
    try:
        with server.client(timeout=1) as client:
            page = client.get("/v1/jobs", params={"state": "running", "limit": 1}).json()
    except httpx.HTTPError:
        return False
    return bool(page["jobs"])


def _wait_all_terminal(client: httpx.Client, timeout_s: float) -> list[dict[str, Any]]:
    wait_all_terminal(client, timeout_s)
    jobs = list_jobs(client)
    active = [job["id"] for job in jobs if job["state"] not in TERMINAL_STATES]
    require(active == [], f"jobs listed as active after the queue drained: {active[:10]}")
    return jobs


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
