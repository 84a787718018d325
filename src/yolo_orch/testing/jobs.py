"""Jobs over HTTP for tests and benchmarks: simulated job bodies, waits with deadlines, listings."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx

from yolo_orch.domain import JobState
from yolo_orch.testing.server import require

__all__ = [
    "TERMINAL_STATES",
    "list_jobs",
    "sim_inference",
    "sim_runs",
    "sim_training",
    "wait_all_terminal",
    "wait_for",
    "wait_terminal",
]

TERMINAL_STATES = frozenset(state.value for state in JobState if state.is_terminal)
"""The states a job ends in, as the API writes them."""

T = TypeVar("T")


def wait_for(check: Callable[[], T], timeout: float, what: str, interval: float = 0.05) -> T:
    """Call `check` until it returns something truthy, and return that; `TimeoutError` naming
    `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def wait_terminal(
    client: httpx.Client, job_id: str, timeout: float, interval: float = 0.05
) -> dict[str, Any]:
    """The job once it has ended: long polls (`Prefer: wait`), so a long wait costs the server a
    request a minute rather than a poll loop competing with the job for the CPU. An answer that
    comes before the job ends (a stopping server answers every wait) is followed by the next
    request `interval` seconds later."""
    deadline = time.monotonic() + timeout
    longest = min(60.0, (client.timeout.read or 60.0) - 2)  # answered before the client gives up
    while True:
        wait = max(1, int(min(longest, deadline - time.monotonic())))
        response = client.get(f"/v1/jobs/{job_id}", headers={"Prefer": f"wait={wait}"})
        require(response.status_code == 200, f"GET job {job_id}: {response.text}")
        job: dict[str, Any] = response.json()
        if job["state"] in TERMINAL_STATES:
            return job
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} still {job['state']} after {timeout}s")
        time.sleep(interval)


def wait_all_terminal(client: httpx.Client, timeout: float, interval: float = 0.2) -> None:
    """Until no job is queued or running."""
    active_states = [state.value for state in JobState if not state.is_terminal]
    deadline = time.monotonic() + timeout
    while True:
        listing = client.get("/v1/jobs", params={"state": active_states, "limit": 1})
        if not listing.json()["jobs"]:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"jobs still active after {timeout}s")
        time.sleep(interval)


def list_jobs(client: httpx.Client, page_size: int = 500) -> list[dict[str, Any]]:
    """Every job, newest first, following `next_cursor` across pages."""
    jobs: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params: dict[str, str | int] = {"limit": page_size}
        if cursor is not None:
            params["cursor"] = cursor
        response = client.get("/v1/jobs", params=params)
        require(response.status_code == 200, f"GET /v1/jobs: {response.text}")
        page = response.json()
        jobs.extend(page["jobs"])
        cursor = page["next_cursor"]
        if cursor is None:
            return jobs


def sim_inference(tag: str, priority: int = 0, **params: object) -> dict[str, Any]:
    """A simulated inference job; `tag` becomes its one input, so the job can be told apart."""
    return {
        "kind": "inference",
        "model": "sim",
        "inputs": [tag],
        "priority": priority,
        "params": params,
    }


def sim_training(tag: str, priority: int = 0, gpus: int = 1, **params: object) -> dict[str, Any]:
    """A simulated training job; `tag` becomes its dataset, so the job can be told apart."""
    return {
        "kind": "training",
        "model": "sim",
        "dataset": tag,
        "gpus": gpus,
        "priority": priority,
        "params": params,
    }


def sim_runs(data_dir: Path, job_id: str) -> list[int]:
    """The attempts that ran to success, in order, from the job's `sim-runs.log`."""
    path = data_dir / "jobs" / job_id / "sim-runs.log"
    if not path.exists():
        return []
    attempts = []
    for line in path.read_text().splitlines():
        words = line.split()
        well_formed = len(words) == 3 and words[0] == "attempt" and words[2] == "succeeded"
        require(well_formed, f"{path}: unexpected line {line!r}")
        attempts.append(int(words[1]))
    return attempts
