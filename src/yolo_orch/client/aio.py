"""`AsyncClient`: `Client`'s twin for asyncio, method for method (see `client.sync` for what each
one does); the requests, answers and errors are built by the same `client.wire`."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from yolo_orch.client import wire
from yolo_orch.client.aliases import AsyncAliases
from yolo_orch.client.datasets import AsyncDatasets
from yolo_orch.client.errors import ApiError
from yolo_orch.client.follow import RECONNECT_BUDGET_S, STREAM_ENDED, Reconnects, job_event
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
from yolo_orch.client.streams import AsyncStreams
from yolo_orch.client.tune import AsyncTune
from yolo_orch.client.wire import Json


class AsyncClient(AsyncStreams, AsyncAliases, AsyncDatasets, AsyncTune):
    """`async with AsyncClient(url, token) as client: job = await client.submit(...)`; stream
    jobs' methods are `client.streams.AsyncStreams`', model aliases'
    `client.aliases.AsyncAliases`', managed datasets' `client.datasets.AsyncDatasets`'."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout_s: float = wire.DEFAULT_TIMEOUT_S,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url, token = wire.resolve(url, token)
        self._has_token = bool(token)
        self._http = httpx.AsyncClient(
            base_url=self.url,
            headers=wire.headers(token),
            timeout=wire.timeout(timeout_s),
            transport=transport,
            follow_redirects=True,  # a standby head's 307 to the active one
            event_hooks={"request": [wire.HeadRedirects(token).aio]},
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # submitting

    async def submit(
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
        headers = wire.submit_headers(idempotency_key, wait_s)
        if not files:
            body = wire.job_body("inference", model, params, priority, inputs=list(inputs))
            return await self._job("POST", "/v1/jobs", json=body, headers=headers, wait_s=wait_s)
        with ExitStack() as stack:  # httpx reads the parts' files as it sends them
            parts = [
                ("images", (path.name, stack.enter_context(path.open("rb")), wire.media_type(path)))
                for path in map(Path, files)
            ]
            fields = {"model": model, "params": json.dumps(params or {}), "priority": str(priority)}
            return await self._job(
                "POST",
                "/v1/jobs/inference",
                data=fields,
                files=parts,
                headers=headers,
                wait_s=wait_s,
            )

    async def train(
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
        body = wire.job_body("training", model, params, priority, dataset=dataset, gpus=gpus)
        return await self.submit_job(body, idempotency_key=idempotency_key, wait_s=wait_s)

    async def validate(
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
        body = wire.job_body("validation", model, params, priority, dataset=dataset, split=split)
        return await self.submit_job(body, idempotency_key=idempotency_key, wait_s=wait_s)

    async def export(
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
        export = wire.export_params(format, imgsz, half, int8, dynamic, batch, params)
        body = wire.job_body("export", model, export, priority, dataset=dataset)
        return await self.submit_job(body, idempotency_key=idempotency_key, wait_s=wait_s)

    async def submit_job(
        self, body: Json, *, idempotency_key: str | None = None, wait_s: float | None = None
    ) -> Job:
        headers = wire.submit_headers(idempotency_key, wait_s)
        return await self._job("POST", "/v1/jobs", json=body, headers=headers, wait_s=wait_s)

    # following

    async def job(self, job_id: str, *, wait_s: float | None = None) -> Job:
        headers = wire.prefer_wait(wait_s)
        return await self._job("GET", wire.job_path(job_id), headers=headers, wait_s=wait_s)

    async def wait(self, job_id: str, *, timeout_s: float | None = None) -> Job:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            left = wire.WAIT_CHUNK_S if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"job {job_id} did not end within {timeout_s:g} s")
            job = await self.job(job_id, wait_s=min(left, wire.WAIT_CHUNK_S))
            if job.state.is_terminal:
                return job

    async def events(
        self, job_id: str, last_event_id: str | None = None
    ) -> AsyncIterator[JobEvent]:
        """As `Client.events`, without the polling fallback: the server has had the stream
        since the async client existed."""
        reconnects = Reconnects(RECONNECT_BUDGET_S, time.monotonic)
        headers = {}
        while True:
            if last_event_id is not None:
                headers["Last-Event-ID"] = last_event_id
            try:
                async with aconnect_sse(
                    self._http, "GET", wire.job_path(job_id, "/events"), headers=headers
                ) as source:
                    if source.response.is_error:
                        await source.response.aread()
                        raise wire.problem(source.response, self._has_token)
                    async for event in source.aiter_sse():
                        reconnects.heard(event.retry)
                        last_event_id = event.id or last_event_id
                        followed = job_event(event)
                        if followed is None:
                            continue
                        yield followed
                        if followed.job.state.is_terminal:
                            return
                await asyncio.sleep(reconnects.delay_after(STREAM_ENDED))
            except ApiError as exc:
                await asyncio.sleep(reconnects.delay_after(exc))
            except httpx.TransportError as exc:
                await asyncio.sleep(reconnects.delay_after(wire.unreachable(self.url, exc)))

    async def jobs(
        self,
        *,
        states: Sequence[str] = (),
        kinds: Sequence[str] = (),
        limit: int = 50,
        cursor: str | None = None,
    ) -> JobList:
        params: list[tuple[str, str | int]] = [("limit", limit)]
        params += [("state", state) for state in states] + [("kind", kind) for kind in kinds]
        if cursor is not None:
            params.append(("cursor", cursor))
        return JobList.model_validate(await self._json("GET", "/v1/jobs", params=params))

    async def cancel(self, job_id: str) -> Job:
        return Job.model_validate(await self._json("POST", wire.job_path(job_id, "/cancel")))

    async def delete(self, job_id: str) -> None:
        await self._request("DELETE", wire.job_path(job_id))

    async def chain(self, chain_id: str) -> Chain:
        return Chain.model_validate(await self._json("GET", wire.chain_path(chain_id)))

    async def cancel_chain(self, chain_id: str) -> Chain:
        path = wire.chain_path(chain_id, "/cancel")
        return Chain.model_validate(await self._json("POST", path))

    # results

    async def result(
        self, job_id: str, *, page_size: int = wire.RESULT_PAGE
    ) -> AsyncIterator[ImageResult]:
        offset: int | None = 0
        while offset is not None:
            params = {"offset": offset, "limit": page_size}
            page = await self._json("GET", wire.job_path(job_id, "/result"), params=params)
            for entry in page["images"]:
                yield IMAGE_RESULT.validate_python(entry)
            offset = page["next_offset"]

    async def result_detail(self, job_id: str) -> JobResultDetail:
        answer = await self._json("GET", wire.job_path(job_id, "/result"))
        return JobResultDetail.model_validate(answer)

    async def metrics(self, job_id: str) -> list[Json]:
        answer = (await self._request("GET", wire.job_path(job_id, "/metrics"))).json()
        return answer if isinstance(answer, list) else []

    async def artifacts(self, job_id: str) -> list[Artifact]:
        answer = await self._json("GET", wire.job_path(job_id, "/artifacts"))
        return [Artifact.model_validate(item) for item in answer["artifacts"]]

    async def download_artifact(self, job_id: str, name: str, to: Path | str) -> Path:
        path = wire.job_path(job_id, f"/artifacts/{wire.segment(name)}")
        return await self.download(path, to, fallback_name=name)

    async def download_model(self, ref: str, to: Path | str) -> Path:
        return await self.download(wire.model_path(ref, "/file"), to, fallback_name=f"{ref}.pt")

    async def download_variant(self, ref: str, variant_id: str, to: Path | str) -> Path:
        path = wire.model_path(ref, f"/variants/{wire.segment(variant_id)}/file")
        return await self.download(path, to, fallback_name=variant_id)

    async def download(self, path: str, to: Path | str, *, fallback_name: str = "download") -> Path:
        try:
            async with self._http.stream("GET", path) as response:
                if response.is_error:
                    await response.aread()
                    raise wire.problem(response, self._has_token)
                target = wire.download_target(Path(to), response, fallback_name)
                partial = wire.partial_path(target)
                digest = hashlib.sha256()
                try:
                    with partial.open("wb") as file:
                        async for chunk in response.aiter_bytes(wire.DOWNLOAD_CHUNK):
                            digest.update(chunk)
                            file.write(chunk)
                    wire.check_digest(wire.sha256_of_etag(response), digest.hexdigest(), path)
                    partial.replace(target)
                finally:
                    partial.unlink(missing_ok=True)
        except httpx.TransportError as exc:
            raise wire.unreachable(self.url, exc) from None
        return target

    # the registry and the host

    async def models(self) -> list[Model]:
        answer = await self._json("GET", "/v1/models")
        return [Model.model_validate(item) for item in answer["models"]]

    async def model(self, ref: str) -> ModelDetail:
        return ModelDetail.model_validate(await self._json("GET", wire.model_path(ref)))

    async def import_model(
        self, path: Path | str, *, name: str | None = None, on_server: bool = False
    ) -> tuple[Model, bool]:
        fields = {"name": name} if name else {}
        response = await self._import("/v1/models", path, fields, on_server)
        return Model.model_validate(wire.body(response)), response.status_code == 201

    async def delete_model(self, ref: str, *, cascade: bool = False) -> None:
        params = {"cascade": "true"} if cascade else {}
        await self._request("DELETE", wire.model_path(ref), params=params)

    async def variants(self, ref: str) -> list[Variant]:
        return (await self.model(ref)).variants

    async def import_variant(
        self, ref: str, path: Path | str, *, on_server: bool = False
    ) -> tuple[Variant, bool]:
        response = await self._import(wire.model_path(ref, "/variants"), path, {}, on_server)
        return Variant.model_validate(wire.body(response)), response.status_code == 201

    async def delete_variant(self, ref: str, variant_id: str) -> None:
        path = wire.model_path(ref, f"/variants/{wire.segment(variant_id)}")
        await self._request("DELETE", path)

    async def devices(self) -> Devices:
        return Devices.model_validate(await self._json("GET", "/v1/devices"))

    # plumbing

    async def _import(
        self, route: str, path: Path | str, fields: dict[str, str], on_server: bool
    ) -> httpx.Response:
        if on_server:
            return await self._request("POST", route, json={"path": str(path), **fields})
        local = Path(path)
        with local.open("rb") as file:  # noqa: ASYNC230 - httpx reads it blockingly anyway
            upload = {"file": (local.name, file, "application/octet-stream")}
            return await self._request("POST", route, files=upload, data=fields or None)

    async def _job(self, method: str, path: str, *, wait_s: float | None, **kwargs: Any) -> Job:
        if wait_s:
            kwargs["timeout"] = wire.timeout(wait_s + wire.DEFAULT_TIMEOUT_S)
        return Job.model_validate(await self._json(method, path, **kwargs))

    async def _json(self, method: str, path: str, **kwargs: Any) -> Json:
        return wire.body(await self._request(method, path, **kwargs))

    async def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise wire.unreachable(self.url, exc) from None
        if response.is_error:
            raise wire.problem(response, self._has_token)
        return response
