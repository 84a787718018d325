"""What `Client` and `AsyncClient` share: the requests' headers, paths and bodies, and how an
answer becomes a typed value or an `ApiError`. Neither does any I/O here."""

from __future__ import annotations

import mimetypes
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import httpx

from yolo_orch import __version__
from yolo_orch.client.errors import ApiError, ClientCode, ExitCode

DEFAULT_URL = "http://127.0.0.1:8000"
URL_ENV = "YOLO_ORCH_URL"
TOKEN_ENV = "YOLO_ORCH_TOKEN"
CONNECT_TIMEOUT_S = 5.0
DEFAULT_TIMEOUT_S = 30.0
WAIT_CHUNK_S = 30.0
"""The longest `Prefer: wait` one request asks for; `wait` asks again until its own timeout.
Below the servers' default `max_wait_s` (60) and common proxies' read timeouts."""
RESULT_PAGE = 100
DOWNLOAD_CHUNK = 1 << 20

Json = dict[str, Any]


def resolve(url: str | None, token: str | None) -> tuple[str, str | None]:
    """The URL and token given, else those of the environment (as the command line reads)."""
    url = url or os.environ.get(URL_ENV) or DEFAULT_URL
    token = token if token is not None else os.environ.get(TOKEN_ENV) or None
    return url.rstrip("/"), token


def headers(token: str | None) -> dict[str, str]:
    sent = {"User-Agent": f"yolo-orch/{__version__}", "Accept": "application/json"}
    if token:
        sent["Authorization"] = f"Bearer {token}"
    return sent


class HeadRedirects:
    """Follow a standby head's 307 to the active head with the token: httpx, like a browser,
    drops `Authorization` on a redirect to another origin, but the server that redirects is the
    one the token was given to, and a standby sends a request only to its active head
    (`api/heads.py`). A request hook runs for every hop, the redirected ones too."""

    def __init__(self, token: str | None) -> None:
        self._authorization = f"Bearer {token}" if token else None

    def sync(self, request: httpx.Request) -> None:
        if self._authorization is not None:
            request.headers.setdefault("Authorization", self._authorization)

    async def aio(self, request: httpx.Request) -> None:
        self.sync(request)


def timeout(read_s: float) -> httpx.Timeout:
    """A held `Prefer: wait` answer must not time out on the read: the read allows it plus a
    margin."""
    return httpx.Timeout(read_s, connect=CONNECT_TIMEOUT_S)


def segment(value: str) -> str:
    """A path segment: a job id or model ref cannot walk to another route."""
    return quote(value, safe="")


def job_path(job_id: str, tail: str = "") -> str:
    return f"/v1/jobs/{segment(job_id)}{tail}"


def chain_path(chain_id: str, tail: str = "") -> str:
    return f"/v1/chains/{segment(chain_id)}{tail}"


def model_path(ref: str, tail: str = "") -> str:
    return f"/v1/models/{segment(ref)}{tail}"


def submit_headers(idempotency_key: str | None, wait_s: float | None) -> dict[str, str]:
    sent = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
    return sent | prefer_wait(wait_s)


def prefer_wait(seconds: float | None) -> dict[str, str]:
    return {"Prefer": f"wait={seconds:g}"} if seconds else {}


def job_body(kind: str, model: str, params: Json | None, priority: int, **fields: Any) -> Json:
    """A `POST /v1/jobs` body; fields given as None are left for the server's defaults."""
    body: Json = {"kind": kind, "model": model, "params": params or {}, "priority": priority}
    return body | {key: value for key, value in fields.items() if value is not None}


def export_params(
    format: str, imgsz: int, half: bool, int8: bool, dynamic: bool, batch: int, extra: Json | None
) -> Json:
    params: Json = {"format": format, "imgsz": imgsz, "half": half, "int8": int8}
    return params | {"dynamic": dynamic, "batch": batch} | (extra or {})


def media_type(path: Path) -> str:
    return mimetypes.guess_type(path.name)[0] or "application/octet-stream"


def body(response: httpx.Response) -> Json:
    if not response.content:
        return {}
    answer = response.json()
    return answer if isinstance(answer, dict) else {"value": answer}


def unreachable(url: str, exc: httpx.TransportError) -> ApiError:
    """The error for a request that got no answer."""
    if isinstance(exc, httpx.TimeoutException):
        detail = f"no answer from {url} in time ({type(exc).__name__})"
    else:
        detail = f"cannot reach the server at {url}: {exc or type(exc).__name__}"
    return ApiError(detail, ClientCode.UNREACHABLE, ExitCode.UNAVAILABLE)


def problem(response: httpx.Response, has_token: bool) -> ApiError:
    """The error for an answer with an error status; its body must have been read."""
    status = response.status_code
    try:
        answer = response.json()
    except ValueError:
        answer = None
    if isinstance(answer, dict) and isinstance(answer.get("detail"), str):
        detail, code = answer["detail"], str(answer.get("code") or f"http_{status}")
    else:
        detail, code = f"HTTP {status} {response.reason_phrase}", f"http_{status}"
    if status == 401 and not has_token:
        detail += f"; pass --token or set {TOKEN_ENV}"
    retry_after = response.headers.get("Retry-After")
    if status in (429, 503) and retry_after:
        detail += f"; retry after {retry_after} s"
    return ApiError(detail, code, ExitCode.for_status(status), status)


_FILENAME_STAR = re.compile(r"filename\*=(?:UTF-8|utf-8)''([^;]+)")
_FILENAME = re.compile(r'filename="?([^";]+)"?')


def download_target(to: Path, response: httpx.Response, fallback: str) -> Path:
    """Where a download goes: `to` itself, or inside it when it is a folder, under the name the
    server gives (Content-Disposition) or `fallback`. Only the name's last part is taken."""
    if not to.is_dir():
        return to
    disposition = response.headers.get("Content-Disposition", "")
    found = _FILENAME_STAR.search(disposition) or _FILENAME.search(disposition)
    name = unquote(found[1]) if found else fallback
    return to / (Path(name).name or fallback)


_SHA256_ETAG = re.compile(r'"([0-9a-f]{64})"')


def sha256_of_etag(response: httpx.Response) -> str | None:
    """The SHA-256 a download route names as its ETag (the digest of the bytes it serves)."""
    found = _SHA256_ETAG.fullmatch(response.headers.get("ETag", ""))
    return found[1] if found else None


def check_digest(expected: str | None, got: str, path: str) -> None:
    """Raises when the bytes received are not those the server fingerprinted (a proxy, a
    truncation): the download is not kept."""
    if expected is not None and got != expected:
        raise ApiError(
            f"{path}: received bytes with SHA-256 {got[:12]}, not the {expected[:12]} served",
            "digest_mismatch",
            ExitCode.UNAVAILABLE,
        )


def partial_path(target: Path) -> Path:
    """Where a download is written until it is complete: a failed one never looks finished."""
    return target.with_name(f".{target.name}.part")
