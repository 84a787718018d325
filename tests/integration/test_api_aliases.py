"""Model aliases through the API: `name@alias` resolves at submission to the model the alias
points to now (404 for an unknown alias), every move is kept, a rollback is a move back, and
moving needs `models:write`."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import serve
from tests.support.problems import assert_problem
from yolo_orch.app import create_app
from yolo_orch.client import ApiError, AsyncClient
from yolo_orch.config import Settings
from yolo_orch.domain import Model, NewModel
from yolo_orch.ops.clock import utcnow
from yolo_orch.testing.yolo import make_images

JOBS_TOKEN = "jobs-token-for-alias-tests"
WRITER_TOKEN = "models-write-token-for-alias-tests"
ADMIN_TOKEN = "admin-token-for-alias-tests"
PRODUCTION = "/v1/models/detector/aliases/production"


def aliased_job() -> dict[str, Any]:
    """An inference job naming the alias (the simulated runtime runs it without weights)."""
    return {"kind": "inference", "model": "detector@production", "inputs": ["img0.jpg"]}


@pytest.fixture
async def client(
    settings_factory: Callable[..., Settings], tmp_path: Path
) -> AsyncIterator[httpx.AsyncClient]:
    make_images(tmp_path / "data", 1)
    settings = settings_factory(data_roots=[tmp_path / "data"])
    async with serve(create_app(settings)) as client:
        yield client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def token(secret: str, scope: str, name: str = "") -> dict[str, str]:
    return {"sha256": hashlib.sha256(secret.encode()).hexdigest(), "scope": scope, "name": name}


async def add_model(client: httpx.AsyncClient, name: str, task: str = "detect") -> Model:
    """A registration as an import makes it (the simulated runtime never loads its file)."""
    services = client._transport.app.state.services  # type: ignore[attr-defined]
    sha256 = hashlib.sha256(name.encode()).hexdigest()
    new = NewModel(name, sha256, 1, task, ("person",), "test", f"{sha256}.pt")
    model: Model = (await services.models._store.add(new, utcnow()))[0]
    return model


async def put(
    client: httpx.AsyncClient, path: str, headers: dict[str, str] | None = None, **body: Any
) -> httpx.Response:
    return await client.put(path, json=body, headers=headers or {})


async def test_a_move_makes_the_alias_and_jobs_naming_it_get_its_model(
    client: httpx.AsyncClient,
) -> None:
    v1 = await add_model(client, "detector-v1")

    moved = await put(client, PRODUCTION, model="detector-v1", reason="first release")

    assert moved.status_code == 200, moved.text
    body = moved.json()
    assert (body["ref"], body["model_id"], body["updated_by"]) == (
        "detector@production",
        v1.id,
        "anonymous",
    )
    assert body["move"]["from_model_id"] is None
    assert body["move"]["reason"] == "first release"
    assert (await client.get(PRODUCTION)).json()["model_id"] == v1.id
    shown = (await client.get("/v1/models/detector@production")).json()
    assert shown["id"] == v1.id
    assert shown["aliases"] == ["detector@production"]
    job = await client.post("/v1/jobs", json=aliased_job())
    assert job.status_code == 202, job.text
    assert job.json()["model"] == "detector@production"


async def test_a_job_naming_an_unknown_alias_is_refused_at_submission(
    client: httpx.AsyncClient,
) -> None:
    await add_model(client, "detector-v1")

    refused = await client.post("/v1/jobs", json=aliased_job())

    assert_problem(refused, 404, "alias_not_found")
    assert (await client.get("/v1/jobs")).json()["jobs"] == []
    assert_problem(await client.get(PRODUCTION), 404, "alias_not_found")


async def test_submission_checks_a_job_against_the_model_the_alias_points_to_now(
    client: httpx.AsyncClient,
) -> None:
    v1 = await add_model(client, "detector-v1")
    v2 = await add_model(client, "detector-v2")
    await put(client, PRODUCTION, model="detector-v1")
    before = await client.get("/v1/models/detector@production")  # the registry keeps answers
    await put(client, PRODUCTION, model="detector-v2")

    after = await client.get("/v1/models/detector@production")

    assert (before.json()["id"], after.json()["id"]) == (v1.id, v2.id)


async def test_the_history_keeps_every_move_newest_first_and_pages(
    client: httpx.AsyncClient,
) -> None:
    v1 = await add_model(client, "detector-v1")
    v2 = await add_model(client, "detector-v2")
    for model in ("detector-v1", "detector-v2", "detector-v1"):
        await put(client, PRODUCTION, model=model)

    first = (await client.get(f"{PRODUCTION}/history", params={"limit": 2})).json()
    rest = (
        await client.get(
            f"{PRODUCTION}/history", params={"limit": 2, "cursor": first["next_cursor"]}
        )
    ).json()

    moves = [(m["from_model_id"], m["to_model_id"]) for m in first["moves"] + rest["moves"]]
    assert moves == [(v2.id, v1.id), (v1.id, v2.id), (None, v1.id)]
    assert rest["next_cursor"] is None


async def test_a_rollback_moves_the_alias_back_and_is_recorded(
    client: httpx.AsyncClient,
) -> None:
    v1 = await add_model(client, "detector-v1")
    await add_model(client, "detector-v2")
    first = await client.post(f"{PRODUCTION}/rollback", json={})
    await put(client, PRODUCTION, model="detector-v1")
    assert_problem(await client.post(f"{PRODUCTION}/rollback"), 409, "alias_has_no_previous")
    await put(client, PRODUCTION, model="detector-v2")

    back = await client.post(f"{PRODUCTION}/rollback", json={"reason": "v2 misses people"})

    assert_problem(first, 404, "alias_not_found")
    assert back.status_code == 200, back.text
    assert back.json()["model_id"] == v1.id
    newest = (await client.get(f"{PRODUCTION}/history")).json()["moves"][0]
    assert (newest["to_model_id"], newest["reason"]) == (v1.id, "v2 misses people")


async def test_a_compare_and_set_move_is_refused_once_the_alias_moved(
    client: httpx.AsyncClient,
) -> None:
    v1 = await add_model(client, "detector-v1")
    v2 = await add_model(client, "detector-v2")
    await put(client, PRODUCTION, model="detector-v1")
    await put(client, PRODUCTION, model="detector-v2")

    refused = await put(client, PRODUCTION, model="detector-v1", expected_model_id=v1.id)
    accepted = await put(client, PRODUCTION, model="detector-v1", expected_model_id=v2.id)

    assert_problem(refused, 409, "alias_moved")
    assert accepted.status_code == 200
    assert len((await client.get(f"{PRODUCTION}/history")).json()["moves"]) == 3


async def test_an_alias_keeps_its_task(client: httpx.AsyncClient) -> None:
    v1 = await add_model(client, "detector-v1")
    await add_model(client, "classifier", task="classify")
    await put(client, PRODUCTION, model="detector-v1")

    refused = await put(client, PRODUCTION, model="classifier")

    assert_problem(refused, 409, "alias_task_mismatch")
    assert (await client.get(PRODUCTION)).json()["model_id"] == v1.id


async def test_a_model_an_alias_points_to_is_not_deleted(client: httpx.AsyncClient) -> None:
    v1 = await add_model(client, "detector-v1")
    await put(client, PRODUCTION, model="detector-v1")

    refused = await client.delete(f"/v1/models/{v1.id}")
    assert_problem(refused, 409, "model_has_aliases")
    assert "detector@production" in refused.json()["detail"]
    assert (await client.delete(PRODUCTION)).status_code == 204

    assert (await client.delete(f"/v1/models/{v1.id}")).status_code == 204
    history = (await client.get(f"{PRODUCTION}/history")).json()["moves"]
    assert [m["to_model_id"] for m in history] == [None, v1.id]


async def test_lists_of_one_name_and_of_all(client: httpx.AsyncClient) -> None:
    await add_model(client, "detector-v1")
    await put(client, PRODUCTION, model="detector-v1")
    await put(client, "/v1/models/detector/aliases/staging", model="detector-v1")
    await put(client, "/v1/models/counter/aliases/production", model="detector-v1")

    named = (await client.get("/v1/models/detector/aliases")).json()["aliases"]
    every = (await client.get("/v1/aliases")).json()["aliases"]

    assert [a["alias"] for a in named] == ["production", "staging"]
    assert [a["ref"] for a in every] == [
        "counter@production",
        "detector@production",
        "detector@staging",
    ]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/models/detector/aliases/Production", {"model": "detector-v1"}),
        ("/v1/models/detector/aliases/-x", {"model": "detector-v1"}),
        (PRODUCTION, {"model": ""}),
        (PRODUCTION, {"model": "detector-v1", "surprise": 1}),
    ],
)
async def test_an_invalid_alias_or_body_is_refused_and_changes_nothing(
    client: httpx.AsyncClient, path: str, body: dict[str, Any]
) -> None:
    await add_model(client, "detector-v1")

    assert_problem(await client.put(path, json=body), 422, "invalid_request")
    assert (await client.get("/v1/aliases")).json()["aliases"] == []


async def test_an_alias_to_an_unusable_model_is_refused(client: httpx.AsyncClient) -> None:
    broken = await add_model(client, "detector-v1")
    services = client._transport.app.state.services  # type: ignore[attr-defined]
    await services.models.mark_unusable(broken.id)

    assert_problem(await put(client, PRODUCTION, model=broken.id), 409, "model_unusable")
    assert (await client.get("/v1/aliases")).json()["aliases"] == []


async def test_an_alias_to_an_unknown_model_is_refused(client: httpx.AsyncClient) -> None:
    assert_problem(await put(client, PRODUCTION, model="nothing"), 404, "model_not_found")


@pytest.fixture
async def guarded(settings_factory: Callable[..., Settings]) -> AsyncIterator[httpx.AsyncClient]:
    tokens = [
        token(JOBS_TOKEN, "jobs", "ci"),
        token(WRITER_TOKEN, "models:write", "release-bot"),
        token(ADMIN_TOKEN, "admin"),
    ]
    async with serve(create_app(settings_factory(tokens=tokens))) as client:
        yield client


async def test_moving_an_alias_needs_models_write_and_records_who(
    guarded: httpx.AsyncClient,
) -> None:
    await add_model(guarded, "detector-v1")
    await add_model(guarded, "detector-v2")

    refused = await put(guarded, PRODUCTION, bearer(JOBS_TOKEN), model="detector-v1")
    by_writer = await put(guarded, PRODUCTION, bearer(WRITER_TOKEN), model="detector-v1")
    by_admin = await put(guarded, PRODUCTION, bearer(ADMIN_TOKEN), model="detector-v2")
    jobs_delete = await guarded.delete(PRODUCTION, headers=bearer(JOBS_TOKEN))

    assert_problem(refused, 403, "forbidden")
    assert_problem(jobs_delete, 403, "forbidden")
    assert by_writer.json()["updated_by"] == "release-bot"
    assert by_admin.json()["updated_by"].startswith("token:")
    read = await guarded.get(f"{PRODUCTION}/history", headers=bearer(JOBS_TOKEN))
    assert [m["actor"] for m in read.json()["moves"]] == [
        by_admin.json()["updated_by"],
        "release-bot",
    ]
    assert (await guarded.delete(PRODUCTION, headers=bearer(WRITER_TOKEN))).status_code == 204


async def test_the_openapi_document_shows_the_alias_routes_and_their_refusals(
    client: httpx.AsyncClient,
) -> None:
    paths = (await client.get("/openapi.json")).json()["paths"]

    put_op = paths["/v1/models/{name}/aliases/{alias}"]["put"]
    assert {"403", "404", "409", "422"} <= set(put_op["responses"])
    assert "/v1/models/{name}/aliases/{alias}/history" in paths
    assert "/v1/aliases" in paths
    problem = put_op["responses"]["409"]["content"]
    assert "application/problem+json" in problem


async def test_the_async_client_moves_lists_and_reads_the_history(
    client: httpx.AsyncClient,
) -> None:
    v1 = await add_model(client, "detector-v1")
    v2 = await add_model(client, "detector-v2")
    transport = httpx.ASGITransport(app=client._transport.app)  # type: ignore[attr-defined]
    async with AsyncClient("http://localhost", transport=transport) as api:
        await api.set_alias("detector", "production", "detector-v1")
        moved = await api.set_alias("detector", "production", "detector-v2", reason="better")
        with pytest.raises(ApiError) as refused:
            await api.set_alias("detector", "production", v1.id, expected_model_id=v1.id)
        back = await api.rollback_alias("detector", "production")
        history = await api.alias_history("detector", "production", limit=2)
        listed = await api.aliases("detector")
        await api.delete_alias("detector", "production")
        remaining = await api.aliases()

    assert (moved.model_id, moved.move.from_model_id, moved.move.reason) == (v2.id, v1.id, "better")
    assert refused.value.code == "alias_moved"
    assert back.model_id == v1.id
    assert [m.to_model_id for m in history.moves] == [v1.id, v2.id]
    assert history.next_cursor is not None
    assert [a.ref for a in listed] == ["detector@production"]
    assert remaining == []


async def test_aliases_are_kept_in_the_database_across_a_restart(
    settings_factory: Callable[..., Settings],
) -> None:
    settings = settings_factory(database_url="")  # SQLite under data_dir
    async with serve(create_app(settings)) as client:
        v1 = await add_model(client, "detector-v1")
        await put(client, PRODUCTION, model="detector-v1", reason="first")
        assert_problem(await client.delete(f"/v1/models/{v1.id}"), 409, "model_has_aliases")

    async with serve(create_app(settings)) as client:
        alias = (await client.get(PRODUCTION)).json()
        history = (await client.get(f"{PRODUCTION}/history")).json()["moves"]
        shown = (await client.get(f"/v1/models/{v1.id}")).json()

    assert alias["model_id"] == v1.id
    assert [(m["to_model_id"], m["reason"]) for m in history] == [(v1.id, "first")]
    assert shown["aliases"] == ["detector@production"]
