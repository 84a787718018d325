"""The real-server harness (`yolo_orch.testing`) as pytest fixtures, and the HTTP checks the
acceptance and proof tests share. Every process a test starts is killed in teardown; when a test
fails, the tails of its servers' logs are printed in the report ("Captured stderr teardown")."""

from __future__ import annotations

import contextlib
import sqlite3
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import make_url

from tests.support.postgres import server_database
from yolo_orch.testing import TERMINAL_STATES, Server, wait_for

ServerFactory = Callable[..., Server]


@contextlib.contextmanager
def module_server(factory: pytest.TempPathFactory, name: str) -> Iterator[Server]:
    """A started simulated server in a folder of its own, for a module's tests to share."""
    base = factory.mktemp(name)
    served = Server(base / "data", base / "logs", name, log_level="warning")
    served.start()
    try:
        yield served
    finally:
        served.cleanup()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.failed:
        item.stash[_FAILED] = True
    return report


_FAILED = pytest.StashKey[bool]()


@pytest.fixture
def server_factory(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[ServerFactory]:
    """`server_factory(name=..., data_dir=..., wrap=..., **settings)`: a `Server` (not started
    yet) with its own data directory unless one is given. All of them are killed at teardown."""
    servers: list[Server] = []

    def make(
        name: str = "server",
        data_dir: Path | None = None,
        wrap: Sequence[str] = (),
        **settings: object,
    ) -> Server:
        data = data_dir or tmp_path / f"{name}-data"
        if "database_url" not in settings and (url := server_database(request)) is not None:
            settings["database_url"] = url
        server = Server(data, tmp_path / "logs", name, **settings)
        server.wrap = list(wrap)
        servers.append(server)
        return server

    try:
        yield make
    finally:
        for server in servers:
            server.cleanup()
        if request.node.stash.get(_FAILED, False):
            for server in servers:
                print(server.log_tails(), file=sys.stderr)


def ray_settings(cluster: Any) -> dict[str, object]:
    """Server settings for the Ray executor on `cluster`, in a namespace of its own (its lane
    and job actors are its own, and a restart of the same server finds them)."""
    return {
        "executor": "ray",
        "ray_address": cluster.address,
        "ray_poll_interval_s": 0.2,
        "ray_namespace": f"test-{uuid.uuid4().hex}",
    }


@pytest.fixture(params=["threads", pytest.param("ray", marks=pytest.mark.ray)])
def executor_settings(request: pytest.FixtureRequest) -> dict[str, object]:
    """Server settings for each executor an acceptance test runs against: this host's
    threads, and a Ray cluster of 2 nodes x 2 logical GPUs (`tests/on_ray`)."""
    if request.param == "threads":
        return {"executor": "threads"}
    return ray_settings(request.getfixturevalue("cluster"))


def list_all_jobs(client: httpx.Client, page_size: int = 50) -> list[dict[str, Any]]:
    """Every job, newest first, following `next_cursor` across pages; asserts that no page is
    longer than asked and no job appears on two."""
    jobs: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(10_000):  # a bound: a cursor loop must not spin forever
        params: dict[str, str | int] = {"limit": page_size}
        if cursor is not None:
            params["cursor"] = cursor
        response = client.get("/v1/jobs", params=params)
        assert response.status_code == 200, response.text
        page = response.json()
        assert len(page["jobs"]) <= page_size
        jobs.extend(page["jobs"])
        cursor = page["next_cursor"]
        if cursor is None:
            ids = [job["id"] for job in jobs]
            assert len(ids) == len(set(ids)), "a job appeared on two pages"
            return jobs
    raise AssertionError("pagination did not end")


def get_job(client: httpx.Client, job_id: str) -> dict[str, Any]:
    response = client.get(f"/v1/jobs/{job_id}")
    assert response.status_code == 200, response.text
    job: dict[str, Any] = response.json()
    return job


def submit(client: httpx.Client, body: dict[str, Any], **headers: str) -> dict[str, Any]:
    response = client.post("/v1/jobs", json=body, headers=headers)
    assert response.status_code == 202, response.text
    job: dict[str, Any] = response.json()
    return job


def all_ended(client: httpx.Client, timeout: float) -> list[dict[str, Any]]:
    """Every job (`list_all_jobs`), once each has ended."""
    jobs: list[dict[str, Any]] = wait_for(
        lambda: (
            (jobs := list_all_jobs(client))
            and all(j["state"] in TERMINAL_STATES for j in jobs)
            and jobs
        ),
        timeout=timeout,
        what="every job to end",
        interval=0.2,
    )
    return jobs


def db_rows(server: Server, query: str) -> list[tuple[Any, ...]]:
    """The rows of `query` (no parameters), read straight from the database of a stopped
    server: SQLite in its data_dir, or its PostgreSQL database."""
    url = str(server.settings.get("database_url", ""))
    if url.startswith("postgresql"):
        import psycopg

        conninfo = make_url(url).set(drivername="postgresql").render_as_string(False)
        with psycopg.connect(conninfo) as conn:
            return list(conn.execute(query.encode()).fetchall())
    with contextlib.closing(sqlite3.connect(server.data_dir / "yolo-orch.db")) as db:
        return list(db.execute(query).fetchall())


def db_job(server: Server, job_id: str) -> tuple[str, int]:
    """(state, attempt) of a job read straight from the database of a stopped server."""
    rows = db_rows(server, f"SELECT state, attempt FROM jobs WHERE id = '{uuid.UUID(job_id)}'")
    assert rows, f"job {job_id} is not in the database"
    return str(rows[0][0]), int(rows[0][1])
