"""GET /v1/meta: the server's own states, kinds with their params' schema, and error codes, as
the dashboard reads them; typed in the OpenAPI document, behind the token like any read, and
served with an ETag."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import httpx

from tests.conftest import serve
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.domain import JobKind, JobState
from yolo_orch.errors import ErrorCode
from yolo_orch.params.common import IMGSZ_MAX, IMGSZ_MIN
from yolo_orch.params.inference import InferenceParams


async def test_meta_names_the_states_in_order_and_which_are_terminal(
    client: httpx.AsyncClient,
) -> None:
    meta = (await client.get("/v1/meta")).json()
    assert meta["states"] == ["queued", "running", "succeeded", "failed", "cancelled"]
    assert meta["states"] == [str(state) for state in JobState]
    assert meta["terminal_states"] == ["succeeded", "failed", "cancelled"]


async def test_meta_gives_each_kind_the_schema_of_its_params(client: httpx.AsyncClient) -> None:
    kinds = {kind["kind"]: kind for kind in (await client.get("/v1/meta")).json()["kinds"]}
    assert list(kinds) == [str(kind) for kind in JobKind]
    inference = kinds["inference"]["params"]
    assert inference == InferenceParams.model_json_schema()
    imgsz = inference["properties"]["imgsz"]
    assert (imgsz["type"], imgsz["default"]) == ("integer", 640)
    assert (imgsz["minimum"], imgsz["maximum"]) == (IMGSZ_MIN, IMGSZ_MAX)
    assert inference["properties"]["conf"]["x-tasks"]  # the tasks a param applies to
    training = kinds["training"]["params"]["properties"]
    assert training["optimizer"]["enum"][0] == "auto"
    assert training["epochs"]["default"] == 100
    # The settings' simulated runtime provides the `sim` model for every kind.
    assert all(kind["runtime_models"] == ["sim"] for kind in kinds.values())


async def test_meta_lists_every_error_code_with_its_meaning(client: httpx.AsyncClient) -> None:
    codes = {
        entry["code"]: entry["meaning"]
        for entry in (await client.get("/v1/meta")).json()["error_codes"]
    }
    assert set(codes) == {str(code) for code in ErrorCode}
    assert codes["queue_full"] == ErrorCode.QUEUE_FULL.meaning
    assert codes["cuda_oom"].startswith("CUDA ran out of memory")


async def test_meta_is_served_with_an_etag_and_answers_304_when_it_matches(
    client: httpx.AsyncClient,
) -> None:
    first = await client.get("/v1/meta")
    etag = first.headers["etag"]
    assert first.headers["cache-control"] == "no-cache"
    again = await client.get("/v1/meta")
    assert again.headers["etag"] == etag
    assert again.content == first.content
    unchanged = await client.get("/v1/meta", headers={"If-None-Match": f'W/{etag}, "other"'})
    assert unchanged.status_code == 304
    assert unchanged.content == b""
    assert unchanged.headers["etag"] == etag
    stale = await client.get("/v1/meta", headers={"If-None-Match": '"not-it"'})
    assert stale.status_code == 200


async def test_meta_is_typed_in_the_openapi_document(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    answer = spec["paths"]["/v1/meta"]["get"]["responses"]["200"]["content"]["application/json"]
    assert answer["schema"] == {"$ref": "#/components/schemas/Meta"}
    meta = spec["components"]["schemas"]["Meta"]
    assert set(meta["properties"]) >= {"states", "terminal_states", "kinds", "error_codes"}
    assert "304" in spec["paths"]["/v1/meta"]["get"]["responses"]


async def test_meta_needs_a_token_like_any_other_read(
    settings_factory: Callable[..., Settings],
) -> None:
    token = "meta-token-for-tests"
    digest = hashlib.sha256(token.encode()).hexdigest()
    settings = settings_factory(tokens=[{"sha256": digest, "scope": "jobs"}])
    async with serve(create_app(settings)) as client:
        refused = await client.get("/v1/meta")
        assert refused.status_code == 401
        assert refused.json()["code"] == ErrorCode.UNAUTHORIZED
        served = await client.get("/v1/meta", headers={"Authorization": f"Bearer {token}"})
        assert served.status_code == 200
        assert served.json()["states"][0] == "queued"
