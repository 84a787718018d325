"""Reading a task's image from Label Studio (its uploads, `/data/...`), with the server's
Label Studio token, from Label Studio's own origin only: a task's URL naming any other host is
refused, so the token never leaves for it and the server fetches nothing else on a task's word.

A personal access token (a JWT) is exchanged for a short-lived access token at
`/api/token/refresh/`, again when Label Studio answers 401; a legacy token is sent as it is."""

from __future__ import annotations

import mimetypes
from pathlib import PurePosixPath
from urllib.parse import urljoin, urlsplit

import anyio
import httpx

_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
_SUFFIXES = {"image/jpeg": ".jpg", "image/png": ".png", "image/webp": ".webp", "image/bmp": ".bmp"}


class ImageUnreadable(Exception):
    """Why a task's image could not be read from Label Studio."""


class LabelStudioImages:
    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        max_bytes: int,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        """`base_url` empty: no image is read (`ImageUnreadable`)."""
        self._base = base_url.rstrip("/")
        self._token = token
        self._max_bytes = max_bytes
        self._transport = transport
        self._access: str | None = None
        self._lock = anyio.Lock()

    @property
    def configured(self) -> bool:
        return bool(self._base and self._token)

    async def read(self, url: str) -> tuple[bytes, str]:
        """The image's bytes and its file suffix (`.jpg`, ...)."""
        if not self.configured:
            raise ImageUnreadable(
                "it is no managed dataset item and label_studio_url or label_studio_token is "
                "not set"
            )
        absolute = urljoin(f"{self._base}/", url)
        if _origin(absolute) != _origin(self._base):
            raise ImageUnreadable(f"{url!r} is not on Label Studio ({self._base})")
        async with httpx.AsyncClient(transport=self._transport, timeout=_TIMEOUT) as client:
            for attempt in range(2):
                headers = {"Authorization": await self._authorization(client, renew=attempt > 0)}
                async with client.stream("GET", absolute, headers=headers) as response:
                    if response.status_code == 401 and attempt == 0 and self._is_jwt():
                        continue  # the access token expired: refresh it once
                    if response.status_code != 200:
                        raise ImageUnreadable(f"Label Studio answered {response.status_code}")
                    body = await self._body(response)
                    return body, _suffix(absolute, response.headers.get("content-type", ""))
        raise ImageUnreadable("Label Studio refused the token")

    async def _body(self, response: httpx.Response) -> bytes:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > self._max_bytes:
                raise ImageUnreadable(f"larger than {self._max_bytes} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    def _is_jwt(self) -> bool:
        return self._token.count(".") == 2

    async def _authorization(self, client: httpx.AsyncClient, *, renew: bool) -> str:
        if not self._is_jwt():
            return f"Token {self._token}"
        async with self._lock:
            if self._access is None or renew:
                response = await client.post(
                    f"{self._base}/api/token/refresh/", json={"refresh": self._token}
                )
                if response.status_code != 200:
                    raise ImageUnreadable(
                        f"Label Studio refused the token's refresh ({response.status_code})"
                    )
                self._access = str(response.json()["access"])
            return f"Bearer {self._access}"


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc.rpartition("@")[2].lower()


def _suffix(url: str, content_type: str) -> str:
    suffix = PurePosixPath(urlsplit(url).path).suffix.lower()
    if suffix in {".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff"}:
        return suffix
    media = content_type.partition(";")[0].strip().lower()
    return _SUFFIXES.get(media) or mimetypes.guess_extension(media) or ".jpg"
