"""Downloads of a model's `.pt` and of its variants (an OpenVINO variant as a zip): the bytes
registered, an ETag of what is served, ranges, 304, tampered files refused; an export job lists
its variant among its artifacts with a URL that downloads it."""

from __future__ import annotations

import hashlib
import io
import zipfile
from typing import Any

import pytest

from tests.support.export_host import Host, host, host_settings
from tests.support.problems import assert_problem

__all__ = ["host", "host_settings"]  # the fixtures, shared with the export tests


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def test_a_models_pt_downloads_with_its_sha256_as_etag_ranges_and_304(host: Host) -> None:
    model = await host.import_tiny()
    original = (host.model_root / "tiny.pt").read_bytes()

    whole = await host.client.get("/v1/models/tiny/file")
    by_id = await host.client.get(f"/v1/models/{model['id']}/file")
    part = await host.client.get("/v1/models/tiny/file", headers={"Range": "bytes=10-19"})
    beyond = await host.client.get("/v1/models/tiny/file", headers={"Range": "bytes=999999999-"})
    unchanged = await host.client.get(
        "/v1/models/tiny/file", headers={"If-None-Match": f'W/"x", "{model["sha256"]}"'}
    )
    head = await host.client.head("/v1/models/tiny/file")

    assert whole.status_code == 200, whole.text
    assert whole.content == original == by_id.content
    assert whole.headers["etag"] == f'"{model["sha256"]}"' == f'"{_sha256(original)}"'
    assert whole.headers["content-disposition"] == 'attachment; filename="tiny.pt"'
    assert whole.headers["content-type"] == "application/octet-stream"
    assert part.status_code == 206
    assert part.content == original[10:20]
    assert part.headers["content-range"] == f"bytes 10-19/{len(original)}"
    assert_problem(beyond, 416, "range_not_satisfiable")
    assert unchanged.status_code == 304
    assert unchanged.content == b""
    assert unchanged.headers["etag"] == whole.headers["etag"]
    assert head.status_code == 200
    assert head.headers["etag"] == whole.headers["etag"]


async def test_an_onnx_export_is_an_artifact_of_its_job_that_downloads_the_variant(
    host: Host,
) -> None:
    await host.import_tiny()
    job = await host.export(format="onnx")
    variant_id = job["result"]["variant_id"]
    registered = (await host.resolved(variant_id)).entry.read_bytes()
    [variant] = await host.variants()

    listed = (await host.client.get(f"/v1/jobs/{job['id']}/artifacts")).json()["artifacts"]
    [artifact] = [a for a in listed if a["name"].endswith(".onnx")]
    fetched = await host.client.get(artifact["url"])
    unchanged = await host.client.get(
        artifact["url"], headers={"If-None-Match": fetched.headers["etag"]}
    )

    assert artifact["name"] == "tiny-onnx.onnx"
    assert artifact["size_bytes"] == len(registered)
    assert artifact["url"] == f"/v1/models/{variant['model_id']}/variants/{variant_id}/file"
    assert fetched.status_code == 200, fetched.text
    assert fetched.content == registered
    assert fetched.headers["etag"] == f'"{variant["sha256"]}"'
    assert variant["files"] == {"model.onnx": _sha256(fetched.content)}
    assert fetched.headers["content-disposition"] == 'attachment; filename="tiny-onnx.onnx"'
    assert unchanged.status_code == 304


async def test_an_openvino_variant_downloads_as_a_zip_of_its_folder_that_imports_again(
    host: Host,
) -> None:
    await host.import_tiny()
    job = await host.export(format="openvino")
    [variant] = await host.variants()
    url = f"/v1/models/tiny/variants/{variant['id']}/file"

    first = await host.client.get(url)
    again = await host.client.get(url)
    part = await host.client.get(url, headers={"Range": "bytes=0-3"})
    unchanged = await host.client.get(url, headers={"If-None-Match": first.headers["etag"]})

    assert first.status_code == 200, first.text
    assert first.headers["content-type"] == "application/zip"
    cd = first.headers["content-disposition"]
    assert cd == 'attachment; filename="tiny_openvino_model.zip"'
    assert first.headers["etag"] == f'"{_sha256(first.content)}"'
    assert again.content == first.content
    assert part.status_code == 206
    assert part.content == b"PK\x03\x04"
    assert unchanged.status_code == 304
    with zipfile.ZipFile(io.BytesIO(first.content)) as archive:
        unpacked = {name: archive.read(name) for name in archive.namelist()}
    assert sorted(unpacked) == [
        "model_openvino_model/metadata.yaml",
        "model_openvino_model/model.bin",
        "model_openvino_model/model.xml",
    ]
    assert {name: _sha256(data) for name, data in unpacked.items()} == variant["files"]
    listed = (await host.client.get(f"/v1/jobs/{job['id']}/artifacts")).json()["artifacts"]
    [artifact] = [a for a in listed if a["name"] == "tiny_openvino_model.zip"]
    assert (await host.client.get(artifact["url"])).content == first.content
    # Deployed elsewhere as it came: the same files are the same variant (200).
    imported = await host.client.post(
        "/v1/models/tiny/variants", files={"file": ("tiny_openvino_model.zip", first.content)}
    )
    assert imported.status_code == 200, imported.text
    assert imported.json()["id"] == variant["id"]


async def test_tampered_files_are_refused_and_marked_as_a_job_would(host: Host) -> None:
    await host.import_tiny()
    await host.export(format="openvino")
    [variant] = await host.variants()
    url = f"/v1/models/tiny/variants/{variant['id']}/file"
    assert (await host.client.get(url)).status_code == 200  # its zip is built and kept
    weights = (await host.resolved(variant["id"])).entry / "model.bin"
    weights.write_bytes(weights.read_bytes()[:-8] + b"tampered")
    pt = host.registry.path_of(await host.registry.get("tiny"))
    pt.write_bytes(pt.read_bytes() + b"\0")

    variant_refused = await host.client.get(url)
    pt_refused = await host.client.get("/v1/models/tiny/file")

    body = assert_problem(variant_refused, 409, "model_tampered")
    assert variant["id"] in body["detail"]
    assert_problem(pt_refused, 409, "model_tampered")
    model: dict[str, Any] = (await host.client.get("/v1/models/tiny")).json()
    assert model["usable"] is False
    assert model["variants"][0]["usable"] is False


async def test_unknown_models_and_variants_are_404(host: Host) -> None:
    await host.import_tiny()
    await host.import_tiny("other")
    await host.export(format="onnx")
    [variant] = await host.variants()

    assert_problem(await host.client.get("/v1/models/nope/file"), 404, "model_not_found")
    assert_problem(
        await host.client.get("/v1/models/tiny/variants/nope/file"), 404, "variant_not_found"
    )
    assert_problem(  # a variant of another model
        await host.client.get(f"/v1/models/other/variants/{variant['id']}/file"),
        404,
        "variant_not_found",
    )


async def test_the_routes_are_documented_with_their_answers(host: Host) -> None:
    spec = (await host.client.get("/openapi.json")).json()
    for path in ("/v1/models/{ref}/file", "/v1/models/{ref}/variants/{variant_id}/file"):
        answers = spec["paths"][path]["get"]["responses"]
        assert {"200", "206", "304", "404", "409", "416"} <= set(answers)
        assert "application/octet-stream" in answers["200"]["content"]
        assert "ETag" in answers["200"]["headers"]
    zipped = spec["paths"]["/v1/models/{ref}/variants/{variant_id}/file"]["get"]["responses"]
    assert "application/zip" in zipped["200"]["content"]


ADMIN_TOKEN, JOBS_TOKEN = "admin-secret", "jobs-secret"
TOKENS = [
    {"sha256": _sha256(ADMIN_TOKEN.encode()), "scope": "admin"},
    {"sha256": _sha256(JOBS_TOKEN.encode()), "scope": "jobs"},
]


@pytest.mark.parametrize("host_settings", [{"tokens": TOKENS}])
async def test_a_jobs_token_downloads_as_it_reads_models(host: Host) -> None:
    host.client.headers["authorization"] = f"Bearer {ADMIN_TOKEN}"
    await host.import_tiny()
    host.client.headers["authorization"] = f"Bearer {JOBS_TOKEN}"
    allowed = await host.client.get("/v1/models/tiny/file")
    del host.client.headers["authorization"]
    refused = await host.client.get("/v1/models/tiny/file")

    assert allowed.status_code == 200, allowed.text
    assert allowed.content == (host.model_root / "tiny.pt").read_bytes()
    assert_problem(refused, 401, "unauthorized")
