"""What an imported variant may be before anything of it is written or copied: an archive
unpacks to at most `MAX_EXPANSION` times its size (a zip bomb is refused before a byte of it is
written), an OpenVINO model is its three files and nothing else, a folder named by path is
checked for its files and `max_upload_bytes` before it is copied, and at most
`max_concurrent_imports` imports run at once (429 `imports_busy` beyond, before the body is
read)."""

from __future__ import annotations

import asyncio
import struct
import zipfile
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from tests.support.problems import assert_problem
from tests.support.variant_imports import (
    GOOD_METADATA,
    IR_BIN,
    THREE_CLASSES,
    api,
    api_app,
    ir_xml,
    openvino_zip,
    patched,
    refused,
)
from yolo_orch.errors import InvalidJob
from yolo_orch.registry.variant_imports import EXPANSION_SLACK, MAX_EXPANSION, unpack_openvino_zip

__all__ = ["api", "api_app"]  # the fixtures, shared with the other import tests


def test_a_zip_bomb_is_refused_before_anything_is_unpacked(tmp_path: Path) -> None:
    # 64 MiB of zeros deflate to 64 KB: a thousandfold, where a model's weights deflate by a few
    # percent.
    bomb = openvino_zip(
        tmp_path / "bomb.zip", GOOD_METADATA, method=zipfile.ZIP_DEFLATED, weights=bytes(64 << 20)
    )
    target = tmp_path / "unpacked"

    with pytest.raises(InvalidJob) as refused:
        unpack_openvino_zip(bomb, target, max_bytes=1 << 30)

    assert refused.value.code == "invalid_variant"
    assert f"at most {MAX_EXPANSION}x the archive's {bomb.stat().st_size} bytes" in str(
        refused.value
    )
    assert not target.exists()  # nothing of it was written


def test_a_zip_that_understates_its_sizes_is_refused_having_written_at_most_the_bound(
    tmp_path: Path,
) -> None:
    bomb = openvino_zip(
        tmp_path / "bomb.zip", GOOD_METADATA, method=zipfile.ZIP_DEFLATED, weights=bytes(4 << 20)
    )
    # The sizes the archive declares say 1 byte: what is written is what counts.
    lying = patched(bomb, 22, struct.pack("<I", 1))
    target = tmp_path / "unpacked"

    with pytest.raises(InvalidJob):
        unpack_openvino_zip(lying, target, max_bytes=1 << 30)

    written = sum(path.stat().st_size for path in target.rglob("*") if path.is_file())
    assert written <= MAX_EXPANSION * lying.stat().st_size + EXPANSION_SLACK


@pytest.mark.parametrize(
    "names",
    [
        ("m.xml", "m.bin"),
        ("m.xml", "other.bin", "metadata.yaml"),
        ("m.xml", "m.bin", "metadata.yaml", "x.txt"),
    ],
    ids=["no-metadata", "bin-of-another-name", "one-more-file"],
)
def test_an_archive_of_other_files_than_a_model_is_refused(
    tmp_path: Path, names: tuple[str, ...]
) -> None:
    archive = tmp_path / "m.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for name in names:
            zipped.writestr(name, GOOD_METADATA if name.endswith(".yaml") else IR_BIN)

    assert "nothing else" in refused(tmp_path, archive)


async def test_a_folder_with_another_file_or_over_the_upload_bound_is_refused_before_copying(
    api: httpx.AsyncClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copies: list[Path] = []
    monkeypatch.setattr(
        "yolo_orch.registry.variant_store.copy_tree_hashing",
        lambda source, *args: copies.append(source),
    )
    root = tmp_path / "weights"
    for name, extra in (("extra_openvino_model", "notes.txt"), ("huge_openvino_model", None)):
        folder = root / name
        folder.mkdir()
        (folder / "m.xml").write_text(ir_xml())
        (folder / "m.bin").write_bytes(IR_BIN)
        (folder / "metadata.yaml").write_text(THREE_CLASSES)
        if extra:
            (folder / extra).write_text("a note")
    with (root / "huge_openvino_model" / "m.bin").open("r+b") as weights:
        weights.truncate(2 << 30)  # sparse: 2 GiB on paper, over max_upload_bytes (1 GiB)
    (root / "huge.onnx").write_bytes(b"")
    with (root / "huge.onnx").open("r+b") as onnx_file:
        onnx_file.truncate(2 << 30)

    extra = await api.post("/v1/models/tiny/variants", json={"path": "extra_openvino_model"})
    huge = await api.post("/v1/models/tiny/variants", json={"path": "huge_openvino_model"})
    huge_onnx = await api.post("/v1/models/tiny/variants", json={"path": "huge.onnx"})

    assert "nothing else" in assert_problem(extra, 422, "invalid_variant")["detail"]
    for response in (huge, huge_onnx):
        assert "max_upload_bytes" in assert_problem(response, 422, "invalid_variant")["detail"]
    assert copies == []
    assert (await api.get("/v1/models/tiny")).json()["variants"] == []


async def test_imports_beyond_max_concurrent_imports_are_refused_before_their_body_is_read(
    api_app: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, api = api_app
    release = asyncio.Event()
    boundary = "b0undary"

    async def slow_upload() -> AsyncIterator[bytes]:
        yield (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="m.onnx"\r\n'
            "\r\n"
        ).encode()
        await release.wait()
        yield f"not a model\r\n--{boundary}--\r\n".encode()

    def upload() -> Awaitable[httpx.Response]:
        return api.post(
            "/v1/models/tiny/variants",
            content=slow_upload(),
            headers={"content-type": f"multipart/form-data; boundary={boundary}"},
        )

    slots = app.state.services.models.imports
    holding = [asyncio.create_task(upload()) for _ in range(2)]  # the default bound: 2
    while slots.active < 2:
        await asyncio.sleep(0.01)

    variant = await api.post("/v1/models/tiny/variants", json={"path": "tiny.onnx"})
    model = await api.post("/v1/models", json={"path": "tiny.pt"})
    release.set()
    held = await asyncio.gather(*holding)
    after = await api.post("/v1/models", json={"path": "tiny.pt"})

    for busy in (variant, model):
        assert "max_concurrent_imports" in assert_problem(busy, 429, "imports_busy")["detail"]
        assert busy.headers["retry-after"] == "5"
    assert [response.status_code for response in held] == [422, 422]  # read once let through
    assert after.status_code == 200  # the slots are free again
    assert slots.active == 0
    paths = (await api.get("/openapi.json")).json()["paths"]
    for route in ("/v1/models", "/v1/models/{ref}/variants"):
        documented = paths[route]["post"]["responses"]["429"]
        assert "Retry-After" in documented["headers"]
        assert "imports_busy" in paths[route]["post"]["description"]
