"""Cross-site requests and DNS rebinding: a page of another site, or a name that is not the
server's, changes and reads nothing."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.conftest import serve, sim_job
from yolo_orch.api.origins import host_names
from yolo_orch.app import create_app
from yolo_orch.config import Settings

EVIL = "http://evil.example"


def _assert_problem(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == code


async def _job_count(client: httpx.AsyncClient) -> int:
    return len((await client.get("/v1/jobs")).json()["jobs"])


@pytest.mark.parametrize(
    "headers", [{"Origin": EVIL}, {"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"}]
)
async def test_pages_of_other_sites_change_nothing(
    client: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    queued = (await client.post("/v1/jobs", json=sim_job(params={"sim_seconds": 30}))).json()
    attempts: list[tuple[str, str, dict[str, Any]]] = [
        ("POST", "/v1/jobs", {"json": sim_job()}),
        ("POST", "/v1/jobs/inference", {"data": {"model": "sim"}, "files": _image()}),
        ("POST", "/v1/models", {"files": {"file": ("w.pt", io.BytesIO(b"x"))}}),
        ("POST", "/v1/models/sim/variants", {"files": {"file": ("m.onnx", io.BytesIO(b"x"))}}),
        ("POST", f"/v1/jobs/{queued['id']}/cancel", {}),
        ("DELETE", f"/v1/jobs/{queued['id']}", {}),
    ]
    for method, path, extra in attempts:
        response = await client.request(method, path, headers=headers, **extra)
        _assert_problem(response, 403, "cross_origin")
    assert await _job_count(client) == 1
    assert (await client.get(f"/v1/jobs/{queued['id']}")).json()["state"] != "cancelled"
    # reading is not refused by this check (the browser keeps the answer from the page)
    assert (await client.get("/v1/jobs", headers=headers)).status_code == 200


async def test_the_servers_own_pages_and_clients_without_an_origin_are_served(
    client: httpx.AsyncClient,
) -> None:
    for headers in ({}, {"Origin": "http://localhost"}, {"Sec-Fetch-Site": "same-origin"}):
        response = await client.post("/v1/jobs", json=sim_job(), headers=headers)
        assert response.status_code == 202, response.text


async def test_another_port_of_the_same_host_is_another_origin(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/jobs", json=sim_job(), headers={"Origin": "http://localhost:3000"}
    )
    _assert_problem(response, 403, "cross_origin")


@pytest.mark.parametrize("path", ["/", "/v1/models", "/v1/jobs", "/openapi.json"])
async def test_a_name_that_is_not_the_servers_reads_nothing(
    client: httpx.AsyncClient, path: str
) -> None:
    response = await client.get(path, headers={"Host": "attacker.example"})
    _assert_problem(response, 421, "host_not_allowed")
    assert "allowed_hosts" in response.json()["detail"]


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
async def test_the_probes_answer_whatever_the_name(client: httpx.AsyncClient, path: str) -> None:
    response = await client.get(path, headers={"Host": "10.1.2.3:8000"})
    assert response.status_code == 200


@pytest.mark.parametrize("host", ["localhost:8000", "127.0.0.1", "[::1]:8000", "LOCALHOST"])
async def test_the_loopback_names_are_the_servers(client: httpx.AsyncClient, host: str) -> None:
    assert (await client.get("/v1/models", headers={"Host": host})).status_code == 200


async def test_allowed_names_and_origins_are_served_with_cors(
    settings_factory: Callable[..., Settings],
) -> None:
    settings = settings_factory(
        allowed_hosts=["gpu-box.lan"], allowed_origins=["https://tools.example"]
    )
    async with serve(create_app(settings)) as client:
        assert (await client.get("/v1/models", headers={"Host": "gpu-box.lan:8000"})).is_success
        preflight = await client.options(
            "/v1/jobs",
            headers={
                "Origin": "https://tools.example",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type",
            },
        )
        assert preflight.status_code == 200
        assert preflight.headers["access-control-allow-origin"] == "https://tools.example"
        response = await client.post(
            "/v1/jobs", json=sim_job(), headers={"Origin": "https://tools.example"}
        )
        assert response.status_code == 202
        assert response.headers["access-control-allow-origin"] == "https://tools.example"
        assert "Location" in response.headers["access-control-expose-headers"]
        refused = await client.post("/v1/jobs", json=sim_job(), headers={"Origin": EVIL})
        _assert_problem(refused, 403, "cross_origin")


async def test_any_name_when_told(settings_factory: Callable[..., Settings]) -> None:
    async with serve(create_app(settings_factory(allowed_hosts=["*"]))) as client:
        assert (await client.get("/v1/models", headers={"Host": "anything"})).is_success


def test_the_names_include_the_bind_address_unless_it_is_a_wildcard() -> None:
    assert "192.0.2.7" in host_names("192.0.2.7", [])
    assert host_names("0.0.0.0", []) == host_names("::", []) == host_names("127.0.0.1", [])
    assert "[fe80::1]" in host_names("fe80::1", [])
    assert "box" in host_names("0.0.0.0", ["Box"])


def _image() -> dict[str, tuple[str, io.BytesIO, str]]:
    return {"images": ("a.jpg", io.BytesIO(b"\xff\xd8\xff"), "image/jpeg")}


async def test_behind_a_proxy_that_passes_the_host_the_public_page_is_the_servers_own(
    settings_factory: Callable[..., Settings],
) -> None:
    async with serve(create_app(settings_factory(allowed_hosts=["public.example"]))) as client:
        page = {"Host": "public.example", "Origin": "https://public.example"}
        assert (await client.post("/v1/jobs", json=sim_job(), headers=page)).status_code == 202
        rewritten = {"Host": "127.0.0.1:8000", "Origin": "https://public.example"}
        refused = await client.post("/v1/jobs", json=sim_job(), headers=rewritten)
        _assert_problem(refused, 403, "cross_origin")
