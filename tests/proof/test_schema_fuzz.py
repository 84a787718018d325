"""Schema fuzzing: schemathesis against the running server's own `/openapi.json` (simulated
runtime, SQLite), every phase (examples, coverage, fuzzing, stateful with the links schemathesis
infers from `Location` headers), bounded by `--max-examples` so each run takes seconds.

- No 5xx and no response that breaks its documented schema: must pass.
- Every other check (status codes, media types, headers, negative data, ...): the findings it
  still reports are server bugs, each reproduced minimally below as a strict xfail.
- `positive_data_acceptance` (a schema-valid request refused) runs on its own: each request it
  finds refused must be one whose operation, or a schema the operation uses, says why, in
  `DOCUMENTED_REFUSALS`. Those are what the schema cannot express: a `sim_*` param with a model
  other than `sim`, a cursor this server never issued, a path import without `model_roots`.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.servers import ServerFactory
from yolo_orch.testing import Server

MAX_EXAMPLES = 15
SEED = 20240601
RUN_TIMEOUT_S = 120


@pytest.fixture
def server(server_factory: ServerFactory) -> Server:
    server = server_factory(sim_lanes=2, max_queued=10_000, log_level="warning")
    server.start()
    return server


# A body over the server's size limit is refused with 413 before it is read: a rejection too.
CONFIG = """
[checks.negative_data_rejection]
expected-statuses = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422",
                     "428", "429", "5XX"]
"""


def schemathesis(server: Server, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "schemathesis.toml").write_text(CONFIG)
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "run",
        f"{server.url}/openapi.json",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--seed",
        str(SEED),
        "--generation-database",
        "none",
        "--request-timeout",
        "10",
        "--no-color",
        "--exclude-path",  # every job's changes, a stream that never ends
        "/v1/events",
        *args,
    ]
    return subprocess.run(
        command,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


@pytest.mark.acceptance
def test_no_server_error_and_no_response_breaks_its_schema(server: Server, tmp_path: Path) -> None:
    run = schemathesis(
        server, tmp_path, "--checks", "not_a_server_error,response_schema_conformance"
    )
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-2000:]
    assert server.running, "the fuzzing killed the server"
    assert "Traceback" not in server.stderr()


DOCUMENTED_REFUSALS = {
    ("GET /v1/jobs", "invalid_cursor"): "did not issue is refused (422 `invalid_cursor`)",
    ("GET /v1/jobs/{job_id}/result", "invalid_request"): "is refused (422 `invalid_request`)",
    ("GET /v1/jobs/{job_id}/result", "not_a_stream"): "another kind: 422 `not_a_stream`",
    ("POST /v1/jobs", "invalid_request"): "model `sim` only (422 with any other)",
    ("POST /v1/jobs/inference", "invalid_request"): "model `sim` only (422 with any other)",
    ("POST /v1/datasets", "invalid_request"): "are refused (422 `invalid_request`)",
    ("POST /v1/datasets", "class_names_too_large"): "(422 `class_names_too_large`)",
    ("POST /v1/models", "no_model_roots"): "`no_model_roots` otherwise",
    ("POST /v1/models", "path_outside_roots"): "is refused (422 `path_outside_roots`)",
    ("GET /v1/data-files", "no_data_roots"): "no data roots at all: 422 `no_data_roots`",
    ("GET /v1/data-files", "path_outside_roots"): "refused (422 `path_outside_roots`), as is",
}
"""(operation, problem code) -> the words of the OpenAPI document that say why."""

_FINDING = re.compile(r"^_+ ((?:GET|POST|PUT|DELETE|PATCH) \S+) _+$")
_STATEFUL = re.compile(r"^_+ Stateful tests _+$")
_CODE = re.compile(r'"code":"([a-z_]+)"')
_CURL = re.compile(r"curl -X (GET|POST|PUT|DELETE|PATCH) .* https?://[^/\s]+(/[^?\s']*)")


@pytest.mark.acceptance
def test_every_schema_valid_request_refused_is_one_the_schema_explains(
    server: Server, tmp_path: Path
) -> None:
    run = schemathesis(server, tmp_path, "--checks", "positive_data_acceptance")
    refused: set[tuple[str, str]] = set()
    operation = found = None
    stateful = False  # a stateful finding names its operation in its curl line only
    for line in run.stdout.splitlines():
        if heading := _FINDING.match(line.strip()):
            operation, stateful = heading.group(1), False
        elif _STATEFUL.match(line.strip()):
            operation, stateful = None, True
        elif code := _CODE.search(line):
            found = code.group(1)
            if operation is not None:
                refused.add((operation, found))
        elif stateful and found is not None and (curl := _CURL.search(line)):
            refused.add((f"{curl.group(1)} {curl.group(2)}", found))
            found = None
    with server.client() as client:
        document = json.dumps(_openapi(client))
    unexplained = sorted(refused - DOCUMENTED_REFUSALS.keys())
    assert unexplained == [], run.stdout[-8000:]
    for why in DOCUMENTED_REFUSALS.values():
        assert json.dumps(why)[1:-1] in document, why
    assert run.returncode == 0 or refused, run.stdout[-8000:]


@pytest.mark.acceptance
def test_every_check_passes(server: Server, tmp_path: Path) -> None:
    run = schemathesis(
        server, tmp_path, "--checks", "all", "--exclude-checks", "positive_data_acceptance"
    )
    assert run.returncode == 0, run.stdout[-8000:]


# --- the findings, each reproduced minimally -----------------------------------------------


def _openapi(client: httpx.Client) -> dict[str, Any]:
    spec: dict[str, Any] = client.get("/openapi.json").json()
    return spec


@pytest.mark.acceptance
def test_validation_errors_are_documented_as_problem_json(server: Server) -> None:
    with server.client() as client:
        response = client.get("/v1/jobs/" + "x" * 65)
        assert response.status_code == 422
        media_type = response.headers["content-type"].split(";")[0]
        assert media_type == "application/problem+json"
        documented = _openapi(client)["paths"]["/v1/jobs/{job_id}"]["get"]["responses"]["422"]
    assert media_type in documented["content"], documented


@pytest.mark.acceptance
def test_method_not_allowed_lists_every_method(server: Server) -> None:
    with server.client() as client:
        response = client.request("OPTIONS", "/v1/jobs")
    assert response.status_code == 405
    allowed = {method.strip() for method in response.headers["allow"].split(",")}
    assert {"GET", "POST"} <= allowed, response.headers["allow"]


@pytest.mark.acceptance
def test_every_schema_reference_resolves(server: Server) -> None:
    with server.client() as client:
        spec = _openapi(client)
    defined = set(spec.get("components", {}).get("schemas", {}))
    refs = set(_refs(spec))
    missing = sorted(
        ref for ref in refs if ref.removeprefix("#/components/schemas/") not in defined
    )
    assert missing == []


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


@pytest.mark.acceptance
def test_an_undecodable_body_gets_a_documented_status(server: Server) -> None:
    with server.client() as client:
        response = client.post(
            "/v1/jobs", content=b"\xc3\x28", headers={"content-type": "application/json"}
        )
        documented = _openapi(client)["paths"]["/v1/jobs"]["post"]["responses"]
    assert response.status_code < 500
    assert str(response.status_code) in documented, response.text


@pytest.mark.acceptance
def test_upload_schema_requires_at_least_one_image(server: Server) -> None:
    with server.client() as client:
        spec = _openapi(client)
    body = spec["paths"]["/v1/jobs/inference"]["post"]["requestBody"]["content"]
    schema = body["multipart/form-data"]["schema"]
    if "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].removeprefix("#/components/schemas/")]
    images = schema["properties"]["images"]
    assert images.get("minItems", 0) >= 1, json.dumps(images)
