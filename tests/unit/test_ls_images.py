"""Task images read from Label Studio: its origin only, with a legacy token as it is or a
personal access token refreshed (again after a 401), and bounded in size."""

from __future__ import annotations

import httpx
import pytest

from yolo_orch.labelling.ls_images import ImageUnreadable, LabelStudioImages

JWT = "aaa.bbb.ccc"


class FakeLabelStudio:
    def __init__(self, *, expire_first: bool = False) -> None:
        self.requests: list[httpx.Request] = []
        self.refreshes = 0
        self._expire_first = expire_first

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.path == "/api/token/refresh/":
            self.refreshes += 1
            return httpx.Response(200, json={"access": f"access-{self.refreshes}"})
        auth = request.headers.get("authorization", "")
        if self._expire_first and auth == "Bearer access-1":
            return httpx.Response(401)
        if auth not in ("Token legacy", "Bearer access-1", "Bearer access-2"):
            return httpx.Response(401)
        if request.url.path.endswith("big.png"):
            return httpx.Response(200, content=b"x" * 5000, headers={"content-type": "image/png"})
        return httpx.Response(200, content=b"jpeg", headers={"content-type": "image/jpeg"})


def images(token: str, fake: FakeLabelStudio, base: str = "http://ls:8080") -> LabelStudioImages:
    return LabelStudioImages(base, token, max_bytes=1024, transport=httpx.MockTransport(fake))


async def test_a_legacy_token_is_sent_as_it_is() -> None:
    fake = FakeLabelStudio()
    body, suffix = await images("legacy", fake).read("/data/upload/3/a1b2-cat")
    assert (body, suffix) == (b"jpeg", ".jpg")  # the suffix from the content type
    assert str(fake.requests[0].url) == "http://ls:8080/data/upload/3/a1b2-cat"


async def test_a_personal_access_token_is_refreshed_once_and_again_after_a_401() -> None:
    fake = FakeLabelStudio(expire_first=True)
    reader = images(JWT, fake)

    assert (await reader.read("http://ls:8080/data/upload/3/x.png"))[1] == ".png"
    assert fake.refreshes == 2  # the first access token was refused: refreshed again
    await reader.read("/data/upload/3/y.jpg")
    assert fake.refreshes == 2  # kept while it works


async def test_other_hosts_are_never_asked() -> None:
    fake = FakeLabelStudio()
    for url in ("http://elsewhere:8080/a.jpg", "https://ls:8080/a.jpg", "http://x@evil/a.jpg"):
        with pytest.raises(ImageUnreadable, match="not on Label Studio"):
            await images("legacy", fake).read(url)
    assert fake.requests == []


async def test_refusals_and_size() -> None:
    fake = FakeLabelStudio()
    with pytest.raises(ImageUnreadable, match="401"):
        await images("wrong", fake).read("/data/upload/1/a.jpg")
    with pytest.raises(ImageUnreadable, match="larger than 1024"):
        await images("legacy", fake).read("/data/upload/1/big.png")
    with pytest.raises(ImageUnreadable, match="label_studio_url"):
        await images("", fake, base="").read("/data/upload/1/a.jpg")
