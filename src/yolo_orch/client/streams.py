"""Stream jobs from Python: `Client` and `AsyncClient` inherit these methods (`SyncStreams`,
`AsyncStreams`), kept apart so that neither client module outgrows a page. A stream reads live
sources until it is cancelled or reaches its `end_s` or `max_frames`; its frames are paged with
`since` (each carries `seq`), its latest annotated frame is a JPEG."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, Protocol

import httpx

from yolo_orch.client import wire
from yolo_orch.client.shapes import Job, StreamFrameEntry, StreamFramePage
from yolo_orch.client.wire import Json

FRAME_PAGE = 100
"""Frames a page asks for by default (the server's default too; it allows 1000)."""
_SNAPSHOT_ACCEPT = {"Accept": "image/jpeg, application/problem+json"}


def stream_body(model: str, sources: Sequence[str], params: Json | None, priority: int) -> Json:
    """The `POST /v1/jobs` body of a stream job."""
    return wire.job_body("stream", model, params, priority, sources=list(sources))


def frames_query(since: int, limit: int) -> dict[str, int]:
    return {"since": since, "limit": limit}


def caught_up(page: StreamFramePage, limit: int) -> bool:
    """A page shorter than asked for holds the newest frames there were: paging stops there."""
    return len(page.frames) < limit


class _SyncRequests(Protocol):
    """What `SyncStreams` asks of the client it is mixed into."""

    def submit_job(
        self, body: Json, *, idempotency_key: str | None = None, wait_s: float | None = None
    ) -> Job: ...

    def _json(self, method: str, path: str, **kwargs: Any) -> Json: ...

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response: ...

    def stream_frames(
        self, job_id: str, since: int = 0, *, limit: int = FRAME_PAGE
    ) -> StreamFramePage: ...


class SyncStreams:
    """`Client`'s stream methods."""

    def submit_stream(
        self: _SyncRequests,
        model: str,
        sources: Sequence[str],
        *,
        params: Json | None = None,
        priority: int = 0,
        idempotency_key: str | None = None,
        wait_s: float | None = None,
    ) -> Job:
        """A stream job: `model` run on `sources` (rtsp://, http(s):// URLs the server's
        `stream_allowed_hosts` allow, or videos under its data roots, looped), with the stream
        params (`max_fps`, `track`, `zones`, `lines`, `end_s`, `max_frames`, ...). It runs until
        cancelled or it reaches `end_s` or `max_frames`."""
        body = stream_body(model, sources, params, priority)
        return self.submit_job(body, idempotency_key=idempotency_key, wait_s=wait_s)

    def stream_frames(
        self: _SyncRequests, job_id: str, since: int = 0, *, limit: int = FRAME_PAGE
    ) -> StreamFramePage:
        """One page: up to `limit` frames with `seq` > `since`, oldest first, of a stream job
        running or ended (`not_a_stream` for another kind)."""
        path = wire.job_path(job_id, "/result")
        return StreamFramePage.model_validate(
            self._json("GET", path, params=frames_query(since, limit))
        )

    def iter_stream_frames(
        self: _SyncRequests, job_id: str, since: int = 0, *, page_size: int = FRAME_PAGE
    ) -> Iterator[StreamFrameEntry]:
        """Every frame after `since` the server keeps, a page at a time, until caught up with
        the stream; then it returns (it does not wait for more). Call it again with the last
        frame's `seq` as `since` to go on."""
        while True:
            page = self.stream_frames(job_id, since, limit=page_size)
            yield from page.frames
            since = page.next_since
            if caught_up(page, page_size):
                return

    def snapshot(self: _SyncRequests, job_id: str) -> bytes:
        """A stream job's latest annotated frame, a JPEG (`snapshot_not_found` until it wrote
        one, or for a job that is not a stream)."""
        path = wire.job_path(job_id, "/snapshot.jpg")
        return self._request("GET", path, headers=_SNAPSHOT_ACCEPT).content


class _AsyncRequests(Protocol):
    """What `AsyncStreams` asks of the client it is mixed into."""

    async def submit_job(
        self, body: Json, *, idempotency_key: str | None = None, wait_s: float | None = None
    ) -> Job: ...

    async def _json(self, method: str, path: str, **kwargs: Any) -> Json: ...

    async def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response: ...

    async def stream_frames(
        self, job_id: str, since: int = 0, *, limit: int = FRAME_PAGE
    ) -> StreamFramePage: ...


class AsyncStreams:
    """`AsyncClient`'s stream methods: `SyncStreams`' twins."""

    async def submit_stream(
        self: _AsyncRequests,
        model: str,
        sources: Sequence[str],
        *,
        params: Json | None = None,
        priority: int = 0,
        idempotency_key: str | None = None,
        wait_s: float | None = None,
    ) -> Job:
        body = stream_body(model, sources, params, priority)
        return await self.submit_job(body, idempotency_key=idempotency_key, wait_s=wait_s)

    async def stream_frames(
        self: _AsyncRequests, job_id: str, since: int = 0, *, limit: int = FRAME_PAGE
    ) -> StreamFramePage:
        path = wire.job_path(job_id, "/result")
        answer = await self._json("GET", path, params=frames_query(since, limit))
        return StreamFramePage.model_validate(answer)

    async def iter_stream_frames(
        self: _AsyncRequests, job_id: str, since: int = 0, *, page_size: int = FRAME_PAGE
    ) -> AsyncIterator[StreamFrameEntry]:
        while True:
            page = await self.stream_frames(job_id, since, limit=page_size)
            for frame in page.frames:
                yield frame
            since = page.next_since
            if caught_up(page, page_size):
                return

    async def snapshot(self: _AsyncRequests, job_id: str) -> bytes:
        path = wire.job_path(job_id, "/snapshot.jpg")
        return (await self._request("GET", path, headers=_SNAPSHOT_ACCEPT)).content
