"""Bearer tokens: hashes in the config, scopes on the routes, open probes, no open server by
accident."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from tests.conftest import serve, sim_job
from tests.support.problems import assert_problem
from yolo_orch.app import create_app
from yolo_orch.config import Settings

JOBS_TOKEN = "jobs-token-for-tests"
ADMIN_TOKEN = "admin-token-for-tests"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
async def client(settings_factory: Callable[..., Settings]) -> AsyncIterator[httpx.AsyncClient]:
    tokens = [
        {"sha256": hashlib.sha256(JOBS_TOKEN.encode()).hexdigest(), "scope": "jobs"},
        {"sha256": hashlib.sha256(ADMIN_TOKEN.encode()).hexdigest(), "scope": "admin"},
    ]
    async with serve(create_app(settings_factory(tokens=tokens))) as client:
        yield client


async def test_v1_needs_a_valid_token(client: httpx.AsyncClient) -> None:
    missing = await client.get("/v1/jobs")
    assert_problem(missing, 401, "unauthorized")
    assert missing.headers["WWW-Authenticate"] == "Bearer"
    assert_problem(await client.get("/v1/jobs", headers=bearer("guess")), 401, "unauthorized")
    basic = {"Authorization": "Basic dXNlcjpwYXNz"}
    assert_problem(await client.get("/v1/devices", headers=basic), 401, "unauthorized")
    assert_problem(await client.post("/v1/jobs", json=sim_job()), 401, "unauthorized")
    assert (await client.get("/v1/jobs")).status_code == 401


async def test_a_jobs_token_runs_jobs_but_cannot_change_models(client: httpx.AsyncClient) -> None:
    headers = bearer(JOBS_TOKEN)
    job = await client.post("/v1/jobs", json=sim_job(), headers=headers)
    assert job.status_code == 202
    job_id = job.json()["id"]
    assert (await client.get(f"/v1/jobs/{job_id}", headers=headers)).status_code == 200
    assert (await client.post(f"/v1/jobs/{job_id}/cancel", headers=headers)).status_code in (
        200,
        202,
        409,
    )
    assert (await client.get("/v1/models", headers=headers)).status_code == 200
    assert (await client.get("/v1/devices", headers=headers)).status_code == 200
    refused = await client.post("/v1/models", json={"path": "x.pt"}, headers=headers)
    assert_problem(refused, 403, "forbidden")
    assert_problem(await client.delete("/v1/models/x", headers=headers), 403, "forbidden")


async def test_an_admin_token_may_do_everything(client: httpx.AsyncClient) -> None:
    headers = bearer(ADMIN_TOKEN)
    assert (await client.post("/v1/jobs", json=sim_job(), headers=headers)).status_code == 202
    # Past authorisation: this server has no model roots, so the import itself is refused.
    refused = await client.post("/v1/models", json={"path": "x.pt"}, headers=headers)
    assert_problem(refused, 422, "no_model_roots")
    assert_problem(await client.delete("/v1/models/x", headers=headers), 404, "model_not_found")


async def test_probes_stay_open(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).status_code == 200
    assert (await client.get("/readyz")).status_code == 200


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10", "::", "example.internal"])
def test_a_reachable_server_needs_tokens_or_an_explicit_opt_out(host: str) -> None:
    with pytest.raises(ValidationError, match="no tokens are configured"):
        Settings(host=host)
    assert Settings(host=host, allow_unauthenticated=True).host == host
    token = {"sha256": "0" * 64, "scope": "jobs"}
    assert Settings(host=host, tokens=[token]).host == host


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.1.2.3"])
def test_loopback_needs_no_tokens(host: str) -> None:
    assert Settings(host=host).host == host


def test_token_hashes_must_look_like_sha256() -> None:
    with pytest.raises(ValidationError):
        Settings(tokens=[{"sha256": "plaintext-token", "scope": "jobs"}])


async def test_metrics_need_a_token_unless_public(
    client: httpx.AsyncClient, settings_factory: Callable[..., Settings], tmp_path: Path
) -> None:
    assert_problem(await client.get("/metrics"), 401, "unauthorized")
    assert (await client.get("/metrics", headers=bearer(JOBS_TOKEN))).status_code == 200
    tokens = [{"sha256": hashlib.sha256(JOBS_TOKEN.encode()).hexdigest(), "scope": "jobs"}]
    public = settings_factory(tokens=tokens, metrics_public=True, data_dir=tmp_path / "other")
    async with serve(create_app(public)) as open_client:
        assert (await open_client.get("/metrics")).status_code == 200
        assert (await open_client.get("/v1/jobs")).status_code == 401


@pytest.mark.parametrize(
    ("method", "path", "content"),
    [
        ("POST", "/v1/jobs", b"{not json"),
        ("POST", "/v1/jobs", b'{"kind": "painting"}'),
        ("POST", "/v1/jobs/inference", b"--nope\r\n"),
        ("POST", "/v1/models", b"{not json"),
    ],
)
async def test_the_token_is_checked_before_the_body_is_read(
    client: httpx.AsyncClient, method: str, path: str, content: bytes
) -> None:
    json_body = {"content-type": "application/json"}
    missing = await client.request(method, path, content=content, headers=json_body)
    assert_problem(missing, 401, "unauthorized")
    wrong = await client.request(
        method, path, content=content, headers={**json_body, **bearer("guess")}
    )
    assert_problem(wrong, 401, "unauthorized")


async def test_a_jobs_token_is_refused_an_import_before_its_body_is_read(
    client: httpx.AsyncClient,
) -> None:
    headers = {"content-type": "application/json", **bearer(JOBS_TOKEN)}
    refused = await client.post("/v1/models", content=b"{not json", headers=headers)
    assert_problem(refused, 403, "forbidden")


async def test_with_tokens_only_the_open_paths_answer_without_one(
    client: httpx.AsyncClient,
) -> None:
    assert_problem(await client.get("/v2/nothing"), 401, "unauthorized")
    assert_problem(await client.delete("/v1/jobs"), 401, "unauthorized")
    assert (await client.get("/docs")).status_code == 200
    assert (await client.get("/openapi.json")).status_code == 200


async def test_the_openapi_document_declares_the_bearer_scheme(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    scheme = spec["components"]["securitySchemes"]["bearer"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            secured = operation.get("security") == [{"bearer": []}]
            assert secured == (path not in ("/healthz", "/readyz")), (method, path)
            if secured:
                assert "401" in operation["responses"], (method, path)
                assert "WWW-Authenticate" in operation["responses"]["401"]["headers"]
    forbidding = {
        (method, path)
        for path, operations in spec["paths"].items()
        for method, operation in operations.items()
        if "403" in operation["responses"]
    }
    # the routes that need the admin scope, and those that other sites' pages may not call:
    # every one that may change something; and the item image, whose `?key=` may be wrong
    assert forbidding == _changing(spec) | {("get", "/v1/datasets/{name}/items/{item}/image")}
    assert {
        ("delete", "/v1/jobs/{job_id}"),
        ("post", "/v1/models"),
        ("delete", "/v1/models/{ref}"),
        ("post", "/v1/models/{ref}/variants"),
        ("delete", "/v1/models/{ref}/variants/{variant_id}"),
    } < forbidding


def _changing(spec: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (method, path)
        for path, operations in spec["paths"].items()
        for method in operations
        if method not in ("get", "head", "options")
    }


async def test_without_tokens_the_document_declares_no_security(
    settings_factory: Callable[..., Settings],
) -> None:
    async with serve(create_app(settings_factory())) as open_client:
        spec = (await open_client.get("/openapi.json")).json()
    assert "securitySchemes" not in spec["components"]
    operations = [operation for ops in spec["paths"].values() for operation in ops.values()]
    assert not any("security" in operation for operation in operations)
    assert not any("401" in operation["responses"] for operation in operations)
    forbidding = {
        (method, path)
        for path, ops in spec["paths"].items()
        for method, operation in ops.items()
        if "403" in operation["responses"]
    }
    assert forbidding == _changing(spec)  # cross_origin only: no scope to lack


async def test_the_api_pages_can_require_a_token(
    settings_factory: Callable[..., Settings],
) -> None:
    tokens = [{"sha256": hashlib.sha256(JOBS_TOKEN.encode()).hexdigest(), "scope": "jobs"}]
    settings = settings_factory(tokens=tokens, docs_require_token=True)
    async with serve(create_app(settings)) as client:
        for page in ("/docs", "/redoc", "/openapi.json"):
            assert_problem(await client.get(page), 401, "unauthorized")
            assert (await client.get(page, headers=bearer(JOBS_TOKEN))).status_code == 200
        assert (await client.get("/docs/assets/swagger-ui.css")).status_code == 200
        assert (await client.get("/healthz")).status_code == 200
