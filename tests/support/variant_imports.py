"""Variant files made by hand and an app to import them into, for the tests of variant imports."""

from __future__ import annotations

import struct
import zipfile
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from tests.conftest import serve
from yolo_orch.app import create_app
from yolo_orch.config import Settings
from yolo_orch.domain.variants import ExportFormat
from yolo_orch.errors import InvalidJob
from yolo_orch.registry.variant_imports import (
    ExportedMetadata,
    describe,
    unpack_openvino_zip,
)
from yolo_orch.testing.yolo import build_checkpoint, ensure_ultralytics

GOOD_METADATA = "task: detect\nbatch: 1\nimgsz: [64, 64]\nnames: {0: cat, 1: dog}\nargs: {}\n"


def _port(port_id: int, dims: Sequence[int], names: str = "") -> str:
    named = f' names="{names}"' if names else ""
    sizes = "".join(f"<dim>{d}</dim>" for d in dims)
    return f'<port id="{port_id}" precision="FP32"{named}>{sizes}</port>'


def ir_xml(shape: Sequence[int] = (1, 3, 64, 64)) -> str:
    """A real OpenVINO IR (v11): images -> Add(ones of shape 1x3x1x1, in the .bin) -> Result."""
    data_shape = ",".join("?" if d < 0 else str(d) for d in shape)
    return f"""<?xml version="1.0"?>
<net name="tiny" version="11"><layers>
<layer id="0" name="images" type="Parameter" version="opset1">
<data shape="{data_shape}" element_type="f32"/><output>{_port(0, shape, "images")}</output></layer>
<layer id="1" name="ones" type="Const" version="opset1">
<data element_type="f32" shape="1, 3, 1, 1" offset="0" size="12"/>
<output>{_port(0, (1, 3, 1, 1))}</output></layer>
<layer id="2" name="add" type="Add" version="opset1"><data auto_broadcast="numpy"/>
<input>{_port(0, shape)}{_port(1, (1, 3, 1, 1))}</input><output>{_port(2, shape, "out")}</output>
</layer>
<layer id="3" name="out" type="Result" version="opset1"><input>{_port(0, shape)}</input></layer>
</layers><edges>
<edge from-layer="0" from-port="0" to-layer="2" to-port="0"/>
<edge from-layer="1" from-port="0" to-layer="2" to-port="1"/>
<edge from-layer="2" from-port="2" to-layer="3" to-port="0"/>
</edges></net>
"""


IR_BIN = struct.pack("<3f", 1.0, 1.0, 1.0)


def openvino_zip(
    path: Path,
    metadata: str,
    *,
    method: int = zipfile.ZIP_STORED,
    xml: str | bytes | None = None,
    weights: bytes = IR_BIN,
) -> Path:
    with zipfile.ZipFile(path, "w", compression=method) as zipped:
        zipped.writestr("m.xml", ir_xml() if xml is None else xml)
        zipped.writestr("m.bin", weights)
        zipped.writestr("metadata.yaml", metadata)
    return path


def described(tmp_path: Path, archive: Path) -> ExportedMetadata:
    target = tmp_path / "unpacked"
    unpack_openvino_zip(archive, target, max_bytes=1 << 20)
    return describe(target, ExportFormat.OPENVINO, max_names=2)


def refused(tmp_path: Path, archive: Path) -> str:
    return refusal(tmp_path, lambda: described(tmp_path, archive))


def refusal(tmp_path: Path, describing: Callable[[], ExportedMetadata]) -> str:
    """Why `describing` refused its variant: short, without the server's paths."""
    with pytest.raises(InvalidJob) as caught:
        describing()
    assert caught.value.code == "invalid_variant"
    assert len(caught.value.message) < 500
    assert str(tmp_path) not in caught.value.message
    return caught.value.message


def patched(archive: Path, offset_in_header: int, value: bytes) -> Path:
    """The archive with a field of every local and central header set to `value`."""
    data = bytearray(archive.read_bytes())
    for signature, field in (
        (b"PK\x03\x04", offset_in_header),
        (b"PK\x01\x02", offset_in_header + 2),
    ):
        start = data.find(signature)
        while start != -1:
            data[start + field : start + field + len(value)] = value
            start = data.find(signature, start + 4)
    archive.write_bytes(bytes(data))
    return archive


THREE_CLASSES = "task: detect\nbatch: 1\nimgsz: [64, 64]\nnames: {0: red, 1: green, 2: blue}\n"


@pytest.fixture
async def api_app(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    settings_factory: Callable[..., Settings],
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    build_checkpoint(tmp_path / "weights" / "tiny.pt")  # classes red, green, blue
    settings = settings_factory(runtime="auto", database_url="", model_roots=[tmp_path / "weights"])
    app = create_app(settings)
    async with serve(app) as client:
        imported = await client.post("/v1/models", json={"path": "tiny.pt"})
        assert imported.status_code == 201, imported.text
        yield app, client


@pytest.fixture
def api(api_app: tuple[FastAPI, httpx.AsyncClient]) -> httpx.AsyncClient:
    return api_app[1]
