"""`Client`: the v1 HTTP API from Python, answers typed (`yolo_orch.client.shapes`), every failure
an `ApiError` carrying the exit code the command line ends with. `AsyncClient` is its twin."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Generator, Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
from httpx_sse import ServerSentEvent, connect_sse

from yolo_orch.client import wire
from yolo_orch.client.aliases import SyncAliases
from yolo_orch.client.datasets import SyncDatasets
from yolo_orch.client.errors import ApiError
from yolo_orch.client.follow import follow_events
from yolo_orch.client.shapes import (
    IMAGE_RESULT,
    Artifact,
    Chain,
    Devices,
    ImageResult,
    Job,
    JobEvent,
    JobList,
    JobResultDetail,
    Model,
    ModelDetail,
    Variant,
)
from yolo_orch.client.streams import SyncStreams
from yolo_orch.client.tune import SyncTune
from yolo_orch.client.wire import Json


class Client(SyncStreams, SyncAliases, SyncDatasets, SyncTune):
    """`Client(url, token)`; both default to $YOLO_ORCH_URL and $YOLO_ORCH_TOKEN (else
    http://127.0.0.1:8000, no token). Use it as a context manager, or call `close()`. Stream
    jobs' methods (`submit_stream`, `stream_frames`, ...) are `client.streams.SyncStreams`'; model
    aliases' (`set_alias`, `alias_history`, ...) `client.aliases.SyncAliases`'; managed datasets'
    (`create_dataset`, `download_dataset`, ...) `client.datasets.SyncDatasets`'."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout_s: float = wire.DEFAULT_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url, token = wire.resolve(url, token)
        self._has_token = bool(token)
        self._http = httpx.Client(
            base_url=self.url,
            headers=wire.headers(token),
            timeout=wire.timeout(timeout_s),
            transport=transport,
            follow_redirects=True,  # a standby head's 307 to the active one
            event_hooks={"request": [wire.HeadRedirects(token).sync]},
        )

    def __enter__(self) -> Client:
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

    # submitting

    def submit(
        self,
        model: str,
        inputs: Sequence[str] = (),
        *,
        files: Sequence[Path | str] = (),
        params: Json | None = None,
        priority: int = 0,
        idempotency_key: str | None = None,
        wait_s: float | None = None,
    ) -> Job:
        """An inference job on images under the server's data roots (`inputs`, globs allowed)
        or on local files uploaded with it (`files`). With `wait_s`, the server holds its
        answer up to that long for the job to end (`Prefer: wait`)."""
        if files:
            return self._upload(model, files, params, priority, idempotency_key, wait_s)
        body = wire.job_body("inference", model, params, priority, inputs=list(inputs))
        return self.submit_job(body, idempotency_key=idempotency_key, wait_s=wait_s)

    def train(
        self,
        model: str,
        dataset: str | None = None,
        *,
        gpus: int = 1,
        params: Json | None = None,
        priority: int = 0,
        idempotency_key: str | None = None,
        wait_s: float | None = None,
    ) -> Job:
        """A training job: `model` a registered model or an architecture (yolo11n.yaml),
        `dataset` a data.yaml under a data root; the best weights are registered."""
        body = wire.job_body("training", model, params, priority, dataset=dataset, gpus=gpus)
        return self.submit_job(body, idempotency_key=idempotency_key, wait_s=wait_s)

    def validate(
        self,
        model: str,
        dataset: str | None = None,
        *,
        split: str = "val",
        params: Json | None = None,
        priority: int = 0,
        idempotency_key: str | None = None,
        wait_s: float | None = None,
    ) -> Job:
        """A validation job: the model's metrics on the dataset's split."""
        body = wire.job_body("validation", model, params, priority, dataset=dataset, split=split)
        return self.submit_job(body, idempotency_key=idempotency_key, wait_s=wait_s)

    def export(
        self,
        model: str,
        format: str,
        *,
        imgsz: int = 640,
        half: bool = False,
        int8: bool = False,
        dynamic: bool = False,
        batch: int = 1,
        dataset: str | None = None,
        params: Json | None = None,
        priority: int = 0,
        idempotency_key: str | None = None,
        wait_s: float | None = None,
    ) -> Job:
        """An export job: a variant of the model (onnx, openvino, torchscript, engine); int8
        calibrates on `dataset`."""
        export = wire.export_params(format, imgsz, half, int8, dynamic, batch, params)
        body = wire.job_body("export", model, export, priority, dataset=dataset)
        return self.submit_job(body, idempotency_key=idempotency_key, wait_s=wait_s)

    def submit_job(
        self, body: Json, *, idempotency_key: str | None = None, wait_s: float | None = None
    ) -> Job:
        """Any `POST /v1/jobs` body, as the API documents it."""
        headers = wire.submit_headers(idempotency_key, wait_s)
        return self._job("POST", "/v1/jobs", json=body, headers=headers, wait_s=wait_s)

    def _upload(
        self,
        model: str,
        files: Sequence[Path | str],
        params: Json | None,
        priority: int,
        idempotency_key: str | None,
        wait_s: float | None,
    ) -> Job:
        with ExitStack() as stack:
            parts = [
                ("images", (path.name, stack.enter_context(path.open("rb")), wire.media_type(path)))
                for path in map(Path, files)
            ]
            fields = {"model": model, "params": json.dumps(params or {}), "priority": str(priority)}
            return self._job(
                "POST",
                "/v1/jobs/inference",
                data=fields,
                files=parts,
                headers=wire.submit_headers(idempotency_key, wait_s),
                wait_s=wait_s,
            )

    # following

    def job(self, job_id: str, *, wait_s: float | None = None) -> Job:
        """The job; with `wait_s`, once it ends or after that long, whichever comes first."""
        headers = wire.prefer_wait(wait_s)
        return self._job("GET", wire.job_path(job_id), headers=headers, wait_s=wait_s)

    def wait(self, job_id: str, *, timeout_s: float | None = None) -> Job:
        """The job once it has ended, asking with `Prefer: wait` again until it has; raises
        `TimeoutError` after `timeout_s` (None: no limit)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            left = wire.WAIT_CHUNK_S if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"job {job_id} did not end within {timeout_s:g} s")
            job = self.job(job_id, wait_s=min(left, wire.WAIT_CHUNK_S))
            if job.state.is_terminal:
                return job

    def events(
        self, job_id: str, last_event_id: str | None = None
    ) -> Generator[JobEvent, None, None]:
        """The job's events until it ends: the first is the job as it is now (or, with
        `last_event_id`, the first change after that event). A dropped stream is resumed with
        `Last-Event-ID`; a server without one is polled."""
        return follow_events(self, job_id, last_event_id)

    def stream_events(
        self, job_id: str, last_event_id: str | None = None
    ) -> Generator[ServerSentEvent, None, None]:
        """One connection to the job's event stream, raw, until the server ends it. Raises
        `ApiError` when refused, `httpx.TransportError` when the connection drops."""
        headers = {"Last-Event-ID": last_event_id} if last_event_id is not None else {}
        path = wire.job_path(job_id, "/events")
        try:
            with connect_sse(self._http, "GET", path, headers=headers) as source:
                if source.response.is_error:
                    source.response.read()
                    raise wire.problem(source.response, self._has_token)
                yield from source.iter_sse()
        except httpx.ConnectError as exc:
            raise self.unreachable(exc) from None

    def jobs(
        self,
        *,
        states: Sequence[str] = (),
        kinds: Sequence[str] = (),
        limit: int = 50,
        cursor: str | None = None,
    ) -> JobList:
        """A page of jobs, newest first; pass its `next_cursor` as `cursor` for the next."""
        params: list[tuple[str, str | int]] = [("limit", limit)]
        params += [("state", state) for state in states] + [("kind", kind) for kind in kinds]
        if cursor is not None:
            params.append(("cursor", cursor))
        return JobList.model_validate(self._json("GET", "/v1/jobs", params=params))

    def cancel(self, job_id: str) -> Job:
        return Job.model_validate(self._json("POST", wire.job_path(job_id, "/cancel")))

    def delete(self, job_id: str) -> None:
        """Delete a finished job's record and files."""
        self._request("DELETE", wire.job_path(job_id))

    def chain(self, chain_id: str) -> Chain:
        """A training's chain (`then`): its steps in order, its state, whether it promoted."""
        return Chain.model_validate(self._json("GET", wire.chain_path(chain_id)))

    def cancel_chain(self, chain_id: str) -> Chain:
        """Cancel every step of the chain that has not ended."""
        return Chain.model_validate(self._json("POST", wire.chain_path(chain_id, "/cancel")))

    # results

    def result(self, job_id: str, *, page_size: int = wire.RESULT_PAGE) -> Iterator[ImageResult]:
        """A succeeded inference job's per-image entries, in input order, a page at a time."""
        offset: int | None = 0
        while offset is not None:
            params = {"offset": offset, "limit": page_size}
            page = self._json("GET", wire.job_path(job_id, "/result"), params=params)
            for entry in page["images"]:
                yield IMAGE_RESULT.validate_python(entry)
            offset = page["next_offset"]

    def result_detail(self, job_id: str) -> JobResultDetail:
        """A succeeded job's whole result: training's, validation's or export's (or a small
        inference job's)."""
        answer = self._json("GET", wire.job_path(job_id, "/result"))
        return JobResultDetail.model_validate(answer)

    def metrics(self, job_id: str) -> list[Json]:
        """A training job's metrics per completed epoch."""
        answer = self._request("GET", wire.job_path(job_id, "/metrics")).json()
        return answer if isinstance(answer, list) else []

    def artifacts(self, job_id: str) -> list[Artifact]:
        answer = self._json("GET", wire.job_path(job_id, "/artifacts"))
        return [Artifact.model_validate(item) for item in answer["artifacts"]]

    def download_artifact(self, job_id: str, name: str, to: Path | str) -> Path:
        """One artifact, streamed to `to` (a file, or a folder to put it in)."""
        path = wire.job_path(job_id, f"/artifacts/{wire.segment(name)}")
        return self.download(path, to, fallback_name=name)

    def download_model(self, ref: str, to: Path | str) -> Path:
        """A model's .pt, streamed to `to` (a file, or a folder to put it in)."""
        return self.download(wire.model_path(ref, "/file"), to, fallback_name=f"{ref}.pt")

    def download_variant(self, ref: str, variant_id: str, to: Path | str) -> Path:
        """A variant's file (a zip of an OpenVINO model's folder), streamed to `to`."""
        path = wire.model_path(ref, f"/variants/{wire.segment(variant_id)}/file")
        return self.download(path, to, fallback_name=variant_id)

    def download(self, path: str, to: Path | str, *, fallback_name: str = "download") -> Path:
        """`GET path` (any download route: an artifact's `url`, say) streamed to `to`, through
        a partial file renamed once complete; where the route names the SHA-256 of what it
        serves (its ETag), the bytes are checked against it. The path written."""
        try:
            with self._http.stream("GET", path) as response:
                if response.is_error:
                    response.read()
                    raise wire.problem(response, self._has_token)
                target = wire.download_target(Path(to), response, fallback_name)
                partial = wire.partial_path(target)
                digest = hashlib.sha256()
                try:
                    with partial.open("wb") as file:
                        for chunk in response.iter_bytes(wire.DOWNLOAD_CHUNK):
                            digest.update(chunk)
                            file.write(chunk)
                    wire.check_digest(wire.sha256_of_etag(response), digest.hexdigest(), path)
                    partial.replace(target)
                finally:
                    partial.unlink(missing_ok=True)
        except httpx.TransportError as exc:
            raise self.unreachable(exc) from None
        return target

    # the registry and the host

    def models(self) -> list[Model]:
        return [Model.model_validate(item) for item in self._json("GET", "/v1/models")["models"]]

    def model(self, ref: str) -> ModelDetail:
        """A model and its variants."""
        return ModelDetail.model_validate(self._json("GET", wire.model_path(ref)))

    def import_model(
        self, path: Path | str, *, name: str | None = None, on_server: bool = False
    ) -> tuple[Model, bool]:
        """Import weights: a local .pt uploaded, or with `on_server` a path under a model
        root. (The model, whether this import registered it.)"""
        fields = {"name": name} if name else {}
        response = self._import("/v1/models", path, fields, on_server)
        return Model.model_validate(wire.body(response)), response.status_code == 201

    def delete_model(self, ref: str, *, cascade: bool = False) -> None:
        params = {"cascade": "true"} if cascade else {}
        self._request("DELETE", wire.model_path(ref), params=params)

    def variants(self, ref: str) -> list[Variant]:
        return self.model(ref).variants

    def import_variant(
        self, ref: str, path: Path | str, *, on_server: bool = False
    ) -> tuple[Variant, bool]:
        """Import an exported variant (an .onnx file, a zip or folder of an OpenVINO model)."""
        response = self._import(wire.model_path(ref, "/variants"), path, {}, on_server)
        return Variant.model_validate(wire.body(response)), response.status_code == 201

    def delete_variant(self, ref: str, variant_id: str) -> None:
        self._request("DELETE", wire.model_path(ref, f"/variants/{wire.segment(variant_id)}"))

    def devices(self) -> Devices:
        return Devices.model_validate(self._json("GET", "/v1/devices"))

    # plumbing

    def _import(
        self, route: str, path: Path | str, fields: dict[str, str], on_server: bool
    ) -> httpx.Response:
        if on_server:
            return self._request("POST", route, json={"path": str(path), **fields})
        local = Path(path)
        with local.open("rb") as file:
            upload = {"file": (local.name, file, "application/octet-stream")}
            return self._request("POST", route, files=upload, data=fields or None)

    def _job(self, method: str, path: str, *, wait_s: float | None, **kwargs: Any) -> Job:
        if wait_s:
            kwargs["timeout"] = wire.timeout(wait_s + wire.DEFAULT_TIMEOUT_S)
        return Job.model_validate(self._json(method, path, **kwargs))

    def _json(self, method: str, path: str, **kwargs: Any) -> Json:
        return wire.body(self._request(method, path, **kwargs))

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise self.unreachable(exc) from None
        if response.is_error:
            raise wire.problem(response, self._has_token)
        return response

    def unreachable(self, exc: httpx.TransportError) -> ApiError:
        """The error for a request that got no answer."""
        return wire.unreachable(self.url, exc)
