"""The routes that send a file as it is: an artifact, an uploaded input, a result served from its
file. `Range` read as RFC 9110 §14 says (a header of another unit, or an invalid one, ignored;
an unsatisfiable one a 416 problem), artifact URLs percent-encoded, and pagination cursors
refused unless this server wrote them."""

from __future__ import annotations

import base64
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conftest import serve, sim_job, wait_terminal
from tests.support.problems import PROBLEM, assert_problem
from yolo_orch.app import create_app
from yolo_orch.config import Settings

UPLOAD = bytes(range(256)) * 4
ARTIFACT = b"0123456789" * 50


@dataclass
class Served:
    client: httpx.AsyncClient
    settings: Settings
    job_id: str
    files: dict[str, tuple[str, bytes]]
    """Each route's URL and the bytes it sends."""


@pytest.fixture
async def served(settings_factory: Callable[..., Settings]) -> AsyncIterator[Served]:
    settings = settings_factory(inline_result_bytes=0)  # every result served from its file
    async with serve(create_app(settings)) as client:
        job = (await client.post("/v1/jobs", json=sim_job())).json()
        assert (await wait_terminal(client, job["id"]))["state"] == "succeeded"
        upload = await client.post(
            "/v1/jobs/inference",
            data={"model": "sim"},
            files=[("images", ("photo.jpg", UPLOAD, "image/jpeg"))],
        )
        assert upload.status_code == 202, upload.text
        artifacts = settings.jobs_dir / job["id"] / "artifacts"
        artifacts.mkdir(parents=True, exist_ok=True)
        (artifacts / "plot.png").write_bytes(ARTIFACT)
        result_url = f"/v1/jobs/{job['id']}/result"
        result = (await client.get(result_url)).content
        assert len(result) > 100
        yield Served(
            client,
            settings,
            job["id"],
            {
                "result": (result_url, result),
                "input": (f"/v1/jobs/{upload.json()['id']}/inputs/0", UPLOAD),
                "artifact": (f"/v1/jobs/{job['id']}/artifacts/plot.png", ARTIFACT),
            },
        )


ROUTES = ["result", "input", "artifact"]

IGNORED = [
    "bytes=abc",  # not a range
    "items=0-1",  # a unit this server does not know
    "bytes=5-1",  # last before first: invalid
    "bytes=999999999-1",  # invalid as well, though its first byte lies past the end
    "bytes=0-1,abc",  # one invalid range makes the header invalid
    "bytes=",
    "bytes",
    "=0-1",
    "bytes=1_0-20",  # `int` reads it as 10
    "bytes=\u0661-\u0662",  # Arabic-Indic digits, which `int` reads as 1 and 2
    "bytes=+1-2",
    "bytes=0x1-2",
]


@pytest.mark.parametrize("route", ROUTES)
async def test_an_invalid_range_or_another_unit_is_ignored(served: Served, route: str) -> None:
    url, full = served.files[route]
    for header in IGNORED:
        response = await served.client.get(url, headers={"Range": header.encode()})
        assert response.status_code == 200, (header, response.text)
        assert response.content == full, header
        assert "content-range" not in response.headers, header


@pytest.mark.parametrize("route", ROUTES)
async def test_an_unsatisfiable_range_is_a_416_problem(served: Served, route: str) -> None:
    url, full = served.files[route]
    for header in (
        "bytes=999999999-",
        f"bytes={len(full)}-",
        f"bytes={len(full)}-{len(full) + 10}",
        "bytes=-0",  # a suffix of no bytes
        f"bytes={len(full)}-, 999999999-999999999",
        "bytes=" + "9" * 5000 + "-",  # past what `int` reads from a string
    ):
        response = await served.client.get(url, headers={"Range": header})
        body = assert_problem(response, 416, "range_not_satisfiable")
        assert response.headers["content-range"] == f"bytes */{len(full)}", header
        assert str(len(full)) in body["detail"]
    head = await served.client.head(url, headers={"Range": "bytes=999999999-"})
    assert head.status_code == 416
    assert head.headers["content-range"] == f"bytes */{len(full)}"
    assert head.content == b""


@pytest.mark.parametrize("route", ROUTES)
async def test_valid_ranges_are_served_as_starlette_serves_them(served: Served, route: str) -> None:
    """What worked before stays as it was: one range or several, 206."""
    url, full = served.files[route]
    size = len(full)
    for header, start, end in (
        ("bytes=0-9", 0, 10),
        ("BYTES=5-", 5, size),  # units are case-insensitive
        ("bytes=-7", size - 7, size),
        ("bytes=-999999999", 0, size),
        (f"bytes=3-{size + 100}", 3, size),
        ("bytes=, 2-4,", 2, 5),  # empty list elements are allowed
        ("bytes=0-3,2-6", 0, 7),  # overlapping ranges are sent as one
    ):
        response = await served.client.get(url, headers={"Range": header})
        assert response.status_code == 206, (header, response.text)
        assert response.content == full[start:end], header
        assert response.headers["content-range"] == f"bytes {start}-{end - 1}/{size}", header

    several = await served.client.get(url, headers={"Range": "bytes=0-1,4-5"})
    assert several.status_code == 206
    found = re.fullmatch(r"multipart/byteranges; boundary=(\w+)", several.headers["content-type"])
    assert found is not None
    assert f"Content-Range: bytes 0-1/{size}\r\n\r\n".encode() + full[0:2] in several.content
    assert f"Content-Range: bytes 4-5/{size}\r\n\r\n".encode() + full[4:6] in several.content
    assert several.content.endswith(f"--{found[1]}--".encode())


@pytest.mark.parametrize("route", ROUTES)
async def test_ranges_past_the_end_beside_a_satisfiable_one_are_left_out(
    served: Served, route: str
) -> None:
    """RFC 9110 §15.5.17: 416 only when no range overlaps the file."""
    url, full = served.files[route]
    size = len(full)
    one = await served.client.get(url, headers={"Range": f"bytes=0-1, {size}-, 999999999-"})
    assert one.status_code == 206, one.text
    assert one.content == full[:2]
    assert one.headers["content-range"] == f"bytes 0-1/{size}"
    two = await served.client.get(url, headers={"Range": f"bytes=-0,{size + 5}-,3-4,{size - 1}-"})
    assert two.status_code == 206, two.text
    assert two.headers["content-type"].startswith("multipart/byteranges; boundary=")
    assert f"Content-Range: bytes 3-4/{size}\r\n\r\n".encode() + full[3:5] in two.content
    last = f"Content-Range: bytes {size - 1}-{size - 1}/{size}\r\n\r\n".encode() + full[-1:]
    assert last in two.content
    assert b"bytes */" not in two.content


async def test_the_routes_document_206_and_416(served: Served) -> None:
    paths = (await served.client.get("/openapi.json")).json()["paths"]
    for path in (
        "/v1/jobs/{job_id}/result",
        "/v1/jobs/{job_id}/inputs/{index}",
        "/v1/jobs/{job_id}/artifacts/{name}",
    ):
        responses = paths[path]["get"]["responses"]
        assert "Content-Range" in responses["206"]["headers"], path
        assert set(responses["416"]["content"]) == {PROBLEM}, path
        assert "Content-Range" in responses["416"]["headers"], path


NAMES = [
    "00000_new\nline.jpg",
    "00001_a b.jpg",
    "00002_ünï.jpg",
    "00003_50%.jpg",
    "00004_a#b?c=d&e.jpg",
    "00005_plain.jpg",
]


async def test_artifact_urls_are_percent_encoded_and_fetch_the_file(served: Served) -> None:
    folder: Path = served.settings.jobs_dir / served.job_id / "artifacts"
    for index, name in enumerate(NAMES):
        (folder / name).write_bytes(b"x" * (index + 1))
    listed = (await served.client.get(f"/v1/jobs/{served.job_id}/artifacts")).json()["artifacts"]
    by_name = {artifact["name"]: artifact for artifact in listed}
    assert by_name["00000_new\nline.jpg"]["url"] == (
        f"/v1/jobs/{served.job_id}/artifacts/00000_new%0Aline.jpg"
    )
    assert by_name["00001_a b.jpg"]["url"].endswith("/00001_a%20b.jpg")
    assert by_name["00002_ünï.jpg"]["url"].endswith("/00002_%C3%BCn%C3%AF.jpg")
    assert by_name["00003_50%.jpg"]["url"].endswith("/00003_50%25.jpg")
    assert by_name["00004_a#b?c=d&e.jpg"]["url"].endswith("/00004_a%23b%3Fc%3Dd%26e.jpg")
    assert by_name["00005_plain.jpg"]["url"].endswith("/00005_plain.jpg")
    for index, name in enumerate(NAMES):
        url = by_name[name]["url"]
        assert re.fullmatch(r"[A-Za-z0-9/_.%~-]+", url), url
        fetched = await served.client.get(url)
        assert fetched.status_code == 200, (name, fetched.text)
        assert fetched.content == b"x" * (index + 1), name


def _cursor(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        _cursor("seq:\u0661\u0662"),  # Arabic-Indic digits
        _cursor("seq:\uff11"),  # fullwidth
        _cursor("seq:01"),  # never written with a leading zero
        "c2VxOjF",  # `seq:1` spelled with stray low bits: this server writes `c2VxOjE`
    ],
)
async def test_a_cursor_this_server_did_not_write_is_refused(
    client: httpx.AsyncClient, cursor: str
) -> None:
    refused = await client.get("/v1/jobs", params={"cursor": cursor})
    assert_problem(refused, 422, "invalid_cursor")
