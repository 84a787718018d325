"""A thin synchronous client of the HTTP API: one method per endpoint; every failure becomes an
`ApiError` carrying the exit code the command line should end with."""

from __future__ import annotations

import json
import mimetypes
from collections.abc import Generator, Sequence
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx
from httpx_sse import ServerSentEvent, connect_sse

from yolo_orch import __version__
from yolo_orch.client.errors import ApiError, ExitCode

DEFAULT_URL = "http://127.0.0.1:8000"
CONNECT_TIMEOUT_S = 5.0
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=CONNECT_TIMEOUT_S)
# An event stream may stay quiet while a job waits in the queue; a read timeout only makes the
# client reconnect (with Last-Event-ID), so it need not be long.
EVENTS_TIMEOUT = httpx.Timeout(60.0, connect=CONNECT_TIMEOUT_S)

Json = dict[str, Any]


class ApiClient:
    def __init__(
        self,
        url: str = DEFAULT_URL,
        token: str | None = None,
        *,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"User-Agent": f"yolo-orch/{__version__}", "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.url = url.rstrip("/")
        self._has_token = bool(token)
        self._http = httpx.Client(
            base_url=self.url, headers=headers, timeout=EVENTS_TIMEOUT, transport=transport
        )

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # jobs

    def submit(
        self, body: Json, idempotency_key: str | None = None, wait_s: float | None = None
    ) -> Json:
        """With `wait_s`, the server holds the answer up to that long for the job to end
        (`Prefer: wait`): the job comes back finished when it was quick enough."""
        headers = _idempotency(idempotency_key) | _prefer_wait(wait_s)
        return self._json("POST", "/v1/jobs", json=body, headers=headers)

    def submit_upload(
        self,
        model: str,
        files: Sequence[Path],
        params: Json,
        priority: int = 0,
        idempotency_key: str | None = None,
        wait_s: float | None = None,
    ) -> Json:
        """An inference job whose images are uploaded with the request (multipart); `wait_s` as
        for `submit`."""
        with ExitStack() as stack:
            parts = [
                ("images", (path.name, stack.enter_context(path.open("rb")), _media_type(path)))
                for path in files
            ]
            return self._json(
                "POST",
                "/v1/jobs/inference",
                data={"model": model, "params": json.dumps(params), "priority": str(priority)},
                files=parts,
                headers=_idempotency(idempotency_key) | _prefer_wait(wait_s),
            )

    def job(self, job_id: str) -> Json:
        return self._json("GET", f"/v1/jobs/{_segment(job_id)}")

    def jobs(
        self,
        states: Sequence[str] = (),
        kinds: Sequence[str] = (),
        limit: int = 50,
        cursor: str | None = None,
    ) -> Json:
        params: list[tuple[str, str | int]] = [("limit", limit)]
        params += [("state", state) for state in states]
        params += [("kind", kind) for kind in kinds]
        if cursor is not None:
            params.append(("cursor", cursor))
        return self._json("GET", "/v1/jobs", params=params)

    def cancel(self, job_id: str) -> Json:
        return self._json("POST", f"/v1/jobs/{_segment(job_id)}/cancel")

    def delete_job(self, job_id: str) -> None:
        self._request("DELETE", f"/v1/jobs/{_segment(job_id)}")

    def result(self, job_id: str) -> Json:
        return self._json("GET", f"/v1/jobs/{_segment(job_id)}/result")

    def events(
        self, job_id: str, last_event_id: str | None = None
    ) -> Generator[ServerSentEvent, None, None]:
        """The job's event stream, until the server ends it (or `close()` drops it).

        Raises `ApiError` when the server refuses the stream (a 404 when it has no such
        endpoint), `httpx.TransportError` when the connection drops."""
        headers = {"Last-Event-ID": last_event_id} if last_event_id is not None else {}
        try:
            with connect_sse(
                self._http,
                "GET",
                f"/v1/jobs/{_segment(job_id)}/events",
                headers=headers,
                timeout=EVENTS_TIMEOUT,
            ) as source:
                if source.response.is_error:
                    source.response.read()
                    raise self._problem(source.response)
                yield from source.iter_sse()
        except httpx.ConnectError as exc:
            raise self.unreachable(exc) from None

    # models

    def import_model_file(self, path: Path, name: str | None = None) -> tuple[Json, bool]:
        """Upload weights; (the model, whether this import registered it)."""
        with path.open("rb") as file:
            response = self._request(
                "POST",
                "/v1/models",
                files={"file": (path.name, file, "application/octet-stream")},
                data={"name": name} if name else None,
            )
        return _body(response), response.status_code == httpx.codes.CREATED

    def import_model_path(self, path: str, name: str | None = None) -> tuple[Json, bool]:
        """Import weights the server reads from one of its model roots."""
        body: Json = {"path": path}
        if name:
            body["name"] = name
        response = self._request("POST", "/v1/models", json=body)
        return _body(response), response.status_code == httpx.codes.CREATED

    def models(self) -> Json:
        return self._json("GET", "/v1/models")

    def delete_model(self, ref: str, *, cascade: bool = False) -> None:
        params = {"cascade": "true"} if cascade else {}
        self._request("DELETE", f"/v1/models/{_segment(ref)}", params=params)

    # host

    def devices(self) -> Json:
        return self._json("GET", "/v1/devices")

    # plumbing

    def _json(self, method: str, path: str, **kwargs: Any) -> Json:
        return _body(self._request(method, path, **kwargs))

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise self.unreachable(exc) from None
        if response.is_error:
            raise self._problem(response)
        return response

    def unreachable(self, exc: httpx.TransportError) -> ApiError:
        """The error for a request that got no answer."""
        if isinstance(exc, httpx.TimeoutException):
            detail = f"no answer from {self.url} in time ({type(exc).__name__})"
        else:
            detail = f"cannot reach the server at {self.url}: {exc or type(exc).__name__}"
        return ApiError(detail, "unreachable", ExitCode.UNAVAILABLE)

    def _problem(self, response: httpx.Response) -> ApiError:
        status = response.status_code
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict) and isinstance(body.get("detail"), str):
            detail, code = body["detail"], str(body.get("code") or f"http_{status}")
        else:
            detail, code = f"HTTP {status} {response.reason_phrase}", f"http_{status}"
        if status == 401 and not self._has_token:
            detail += "; pass --token or set YOLO_ORCH_TOKEN"
        retry_after = response.headers.get("Retry-After")
        if status in (429, 503) and retry_after:
            detail += f"; retry after {retry_after} s"
        return ApiError(detail, code, ExitCode.for_status(status), status)


def _body(response: httpx.Response) -> Json:
    if not response.content:
        return {}
    body = response.json()
    return body if isinstance(body, dict) else {"value": body}


def _idempotency(key: str | None) -> dict[str, str]:
    return {"Idempotency-Key": key} if key else {}


def _prefer_wait(seconds: float | None) -> dict[str, str]:
    return {"Prefer": f"wait={seconds:g}"} if seconds else {}


def _segment(value: str) -> str:
    """A path segment: a job id or model ref cannot walk to another route."""
    return quote(value, safe="")


def _media_type(path: Path) -> str:
    return mimetypes.guess_type(path.name)[0] or "application/octet-stream"
