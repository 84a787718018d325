"""GET /v1/data-files through the app's real lifespan: a folder under a data root listed a page
at a time, under the rules a submission's paths follow; each refusal's status and code; and
that listing changes nothing on disk."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest

from tests.conftest import serve
from tests.support.problems import assert_no_server_path, assert_problem
from yolo_orch.app import create_app
from yolo_orch.config import Settings


def tree(root: Path) -> list[tuple[str, int | None]]:
    """Every path under `root` with a file's size: what the tests check stays as it was."""
    found: list[tuple[str, int | None]] = []
    for folder, dirs, files in os.walk(root):
        for name in sorted([*dirs, *files]):
            path = Path(folder, name)
            size = None if path.is_symlink() or path.is_dir() else path.stat().st_size
            found.append((str(path.relative_to(root)), size))
    return sorted(found)


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    images = tmp_path / "images"
    (images / "ds" / "train").mkdir(parents=True)
    (images / "ds" / "val").mkdir()
    (images / "ds" / "data.yaml").write_text("names: [car]\ntrain: train\nval: val\n")
    (images / "ds" / ".hidden").write_text("x")
    for n in range(7):
        (images / "ds" / "train" / f"img{n}.jpg").write_bytes(b"j" * (n + 1))
    (images / "a.jpg").write_bytes(b"12345")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.yaml").write_text("names: [x]\n")
    (images / "out").symlink_to(outside)  # a folder leading out of the root
    (images / "out.yaml").symlink_to(outside / "secret.yaml")  # a file leading out
    (images / "inside").symlink_to(images / "ds")  # a folder inside: listed
    (images / "dangling").symlink_to(images / "nothing")
    more = tmp_path / "more"
    more.mkdir()
    (more / "b.png").write_bytes(b"png")
    return images, more


@pytest.fixture
async def client(
    roots: tuple[Path, Path], settings_factory: Callable[..., Settings]
) -> AsyncIterator[httpx.AsyncClient]:
    settings = settings_factory(data_roots=list(roots), max_walk_entries=50)
    async with serve(create_app(settings)) as client:
        yield client


async def test_a_folder_is_listed_folders_first_then_files_with_sizes(
    client: httpx.AsyncClient, roots: tuple[Path, Path], tmp_path: Path
) -> None:
    response = await client.get("/v1/data-files")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["roots"] == [{"index": 0, "name": "images"}, {"index": 1, "name": "more"}]
    assert (body["root"], body["path"], body["next_offset"]) == (0, "", None)
    # the links leading out and the dangling one are left out; the one inside is listed
    assert body["entries"] == [
        {"name": "ds", "kind": "dir", "size": None},
        {"name": "inside", "kind": "dir", "size": None},
        {"name": "a.jpg", "kind": "file", "size": 5},
    ]
    assert body["total"] == 3
    assert_no_server_path(response.text, tmp_path)

    ds = (await client.get("/v1/data-files", params={"path": "ds/"})).json()
    assert ds["path"] == "ds"
    assert [(e["name"], e["kind"]) for e in ds["entries"]] == [
        ("train", "dir"),
        ("val", "dir"),
        ("data.yaml", "file"),
    ]
    by_name = (await client.get("/v1/data-files", params={"root": "more"})).json()
    assert (by_name["root"], by_name["entries"]) == (
        1,
        [{"name": "b.png", "kind": "file", "size": 3}],
    )
    by_index = (await client.get("/v1/data-files", params={"root": "1", "path": "."})).json()
    assert by_index["entries"] == by_name["entries"]
    through_link = (await client.get("/v1/data-files", params={"path": "inside/train"})).json()
    assert through_link["total"] == 7


async def test_a_folder_is_paged(client: httpx.AsyncClient) -> None:
    seen: list[str] = []
    offset: int | None = 0
    pages = 0
    while offset is not None:
        page = await client.get(
            "/v1/data-files", params={"path": "ds/train", "offset": offset, "limit": 3}
        )
        assert page.status_code == 200, page.text
        body = page.json()
        assert len(body["entries"]) <= 3
        assert body["total"] == 7
        seen += [entry["name"] for entry in body["entries"]]
        offset = body["next_offset"]
        pages += 1
    assert pages == 3
    assert seen == [f"img{n}.jpg" for n in range(7)]
    assert [
        e["size"]
        for e in (
            await client.get("/v1/data-files", params={"path": "ds/train", "offset": 5})
        ).json()["entries"]
    ] == [6, 7]
    past = (await client.get("/v1/data-files", params={"path": "ds", "offset": 99})).json()
    assert (past["entries"], past["next_offset"], past["total"]) == ([], None, 3)
    for limit in (0, 501):
        refused = await client.get("/v1/data-files", params={"limit": limit})
        assert_problem(refused, 422, "invalid_request")


@pytest.mark.parametrize(
    ("root", "path", "code"),
    [
        ("0", "../outside", "path_outside_roots"),
        ("0", "ds/../../outside", "path_outside_roots"),
        ("0", "/etc", "path_outside_roots"),
        ("0", "~", "path_outside_roots"),
        ("0", "out", "path_outside_roots"),  # a symlink leading out of the root
        ("0", "inside/../../outside", "path_outside_roots"),
        ("2", "", "path_outside_roots"),  # no third root
        ("elsewhere", "", "path_outside_roots"),
        ("0", "missing", "invalid_path"),
        ("0", "a.jpg", "path_not_a_directory"),
        ("0", "dangling", "invalid_path"),
    ],
)
async def test_what_a_submission_could_not_name_is_refused_and_nothing_changes(
    client: httpx.AsyncClient,
    roots: tuple[Path, Path],
    tmp_path: Path,
    root: str,
    path: str,
    code: str,
) -> None:
    before = tree(tmp_path)
    response = await client.get("/v1/data-files", params={"root": root, "path": path})
    body = assert_problem(response, 422, code)
    assert_no_server_path(body["detail"], tmp_path)
    assert tree(tmp_path) == before


async def test_a_folder_past_the_walk_limit_is_refused(
    client: httpx.AsyncClient, roots: tuple[Path, Path]
) -> None:
    big = roots[0] / "big"
    big.mkdir()
    for n in range(51):  # max_walk_entries is 50
        (big / f"{n}.jpg").write_bytes(b"")
    response = await client.get("/v1/data-files", params={"path": "big", "limit": 1})
    assert_problem(response, 422, "input_walk_too_large")


async def test_without_data_roots_the_listing_says_so(
    settings_factory: Callable[..., Settings],
) -> None:
    async with serve(create_app(settings_factory())) as client:
        response = await client.get("/v1/data-files")
    assert_problem(response, 422, "no_data_roots")


async def test_any_token_may_list_as_it_may_read_the_jobs(
    roots: tuple[Path, Path], settings_factory: Callable[..., Settings]
) -> None:
    tokens = [
        {"sha256": hashlib.sha256(b"jobs-token").hexdigest(), "scope": "jobs"},
        {"sha256": hashlib.sha256(b"labelling-token").hexdigest(), "scope": "labelling"},
    ]
    settings = settings_factory(data_roots=list(roots), tokens=json.loads(json.dumps(tokens)))
    async with serve(create_app(settings)) as client:
        assert_problem(await client.get("/v1/data-files"), 401, "unauthorized")
        for token, status in (("jobs-token", 200), ("labelling-token", 403)):
            headers = {"Authorization": f"Bearer {token}"}
            jobs = await client.get("/v1/jobs", headers=headers)
            listed = await client.get("/v1/data-files", headers=headers)
            assert (jobs.status_code, listed.status_code) == (status, status)
