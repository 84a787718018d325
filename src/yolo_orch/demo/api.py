"""The few calls of the HTTP API the demo makes: submit a job, follow it to its end, read its
result. Any refusal or failure becomes a `DemoFailed` that says what went wrong and where to look.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import httpx

from yolo_orch.demo.server import DemoServer
from yolo_orch.domain import JobState

__all__ = ["DemoApi", "DemoFailed", "Json"]

Json = dict[str, Any]
POLL_WAIT_S = 2  # a long poll's hold: how often progress is shown while a job runs
JOB_DEADLINE_S = 3600.0


class DemoFailed(RuntimeError):
    """A step of the demo did not succeed; the message says which and why."""


class DemoApi:
    def __init__(
        self,
        url: str,
        token: str | None,
        server: DemoServer | None,
        progress: Callable[[Json], None],
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        # Reads wait up to POLL_WAIT_S on the server, and a job's submission checks its dataset.
        self._http = httpx.Client(base_url=url, headers=headers, timeout=60.0)
        self._server = server
        self._progress = progress

    def close(self) -> None:
        self._http.close()

    def run_job(self, body: Json) -> Json:
        """Submit a job and follow it until it ends; the finished job (it succeeded)."""
        job = self._call("POST", "/v1/jobs", json=body)
        self._progress(job)
        try:
            while not JobState(job["state"]).is_terminal:
                job = self._call(
                    "GET", f"/v1/jobs/{job['id']}", headers={"Prefer": f"wait={POLL_WAIT_S}"}
                )
                self._progress(job)
        except BaseException:
            # Ctrl-C, or the poll failed: a job left running would be resumed by the server's
            # next start, ahead of the next demo's jobs.
            self._cancel_quietly(job["id"])
            raise
        if job["state"] != JobState.SUCCEEDED:
            error = job.get("error") or {}
            raise DemoFailed(
                f"the {job['kind']} job {job['id']} {job['state']}: "
                f"{error.get('code', '')}: {error.get('message', '')}".rstrip(": ")
            )
        return job

    def result(self, job_id: str) -> Json:
        return self._call("GET", f"/v1/jobs/{job_id}/result")

    def _cancel_quietly(self, job_id: str) -> None:
        with contextlib.suppress(httpx.HTTPError):
            self._http.post(f"/v1/jobs/{job_id}/cancel", timeout=5.0)

    def _call(self, method: str, path: str, **kwargs: Any) -> Json:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            if self._server is not None:
                self._server.check_running()  # a server that died says so, with its log
            raise DemoFailed(
                f"{method} {path}: no answer from {self._http.base_url}: {exc}"
            ) from exc
        if response.is_error:
            raise DemoFailed(f"{method} {path}: {response.status_code} {_problem(response)}")
        body: Json = response.json()
        return body


def _problem(response: httpx.Response) -> str:
    """The server's problem JSON, said in one line (its code and detail)."""
    try:
        problem = response.json()
    except ValueError:
        return response.text[:500]
    if not isinstance(problem, dict):
        return str(problem)[:500]
    return f"{problem.get('code', '')}: {problem.get('detail') or problem.get('title', '')}"
