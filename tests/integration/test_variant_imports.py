"""Exported files from clients: every way an archive or its metadata is hostile or broken is a 422
`invalid_variant`, found without expanding what it would expand to; a model its runtime cannot
read, or whose input is not what its metadata says, is refused at import, not at every job
`format: auto` gives it; and the metadata stays within what an export job could have built."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest

from tests.support.problems import assert_problem
from tests.support.variant_imports import (
    GOOD_METADATA,
    IR_BIN,
    THREE_CLASSES,
    api,
    api_app,
    described,
    ir_xml,
    openvino_zip,
    patched,
    refusal,
    refused,
)
from yolo_orch.domain.variants import ExportFormat
from yolo_orch.registry.variant_imports import (
    BATCH_RANGE,
    IMGSZ_RANGE,
    ExportedMetadata,
    describe,
)

__all__ = ["api", "api_app"]  # the fixtures, from tests/support/variant_imports.py

DYNAMIC = (-1, 3, -1, -1)
"""An input shape with every size but the channels dynamic (as OpenVINO writes it: -1)."""


def test_a_good_archive_is_described(tmp_path: Path) -> None:
    meta = described(tmp_path, openvino_zip(tmp_path / "ok.zip", GOOD_METADATA))

    assert meta == ExportedMetadata(
        task="detect",
        class_names=("cat", "dog"),
        imgsz=64,
        batch=1,
        dynamic=False,
        half=False,
        int8=False,
    )


def test_aliases_in_the_metadata_are_refused_not_expanded(tmp_path: Path) -> None:
    laughs = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    laughs += [f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}] " + f"# {i}" for i in range(7)]
    archive = openvino_zip(tmp_path / "laughs.zip", GOOD_METADATA + "\n".join(laughs) + "\n")

    assert "alias" in refused(tmp_path, archive)


@pytest.mark.parametrize(
    "metadata",
    [
        "names: " + "[" * 100_000 + "]" * 100_000,  # past the depth limit
        "names: [" + ", ".join(["a"] * 50_000) + "]",  # past the node budget for 2 names
        "task: detect\nbatch: 1\nimgsz: [64, 64]\nnames: {0: cat, x: dog}\nargs: {}\n",
        "task: detect\nbatch: 1\nimgsz: [64, 64]\nnames: {0: cat, 1.5: dog}\nargs: {}\n",
    ],
    ids=["deep", "many-nodes", "mixed-keys", "float-key"],
)
def test_metadata_that_is_too_deep_large_or_keyed_oddly_is_refused(
    tmp_path: Path, metadata: str
) -> None:
    refused(tmp_path, openvino_zip(tmp_path / "m.zip", metadata))


def test_a_member_named_twice_is_refused(tmp_path: Path) -> None:
    archive = openvino_zip(tmp_path / "dup.zip", GOOD_METADATA)
    with zipfile.ZipFile(archive, "a") as zipped, pytest.warns(UserWarning, match="Duplicate"):
        zipped.writestr("m.bin", b"\1" * 64)

    assert "two files named 'm.bin'" in refused(tmp_path, archive)


def test_an_encrypted_archive_is_refused(tmp_path: Path) -> None:
    archive = patched(openvino_zip(tmp_path / "enc.zip", GOOD_METADATA), 6, b"\x01\x00")

    refused(tmp_path, archive)


def test_a_compression_zipfile_does_not_implement_is_refused(tmp_path: Path) -> None:
    archive = patched(openvino_zip(tmp_path / "d64.zip", GOOD_METADATA), 8, b"\x09\x00")

    refused(tmp_path, archive)


def test_damaged_compressed_data_is_refused(tmp_path: Path) -> None:
    archive = openvino_zip(tmp_path / "bad.zip", GOOD_METADATA, method=zipfile.ZIP_DEFLATED)
    data = bytearray(archive.read_bytes())
    start = data.find(b"m.bin") + len("m.bin")  # the first member's compressed bytes follow
    data[start : start + 8] = b"\xff" * 8
    archive.write_bytes(bytes(data))

    refused(tmp_path, archive)


# -- The model is read by its runtime at import (OpenVINO, ONNX Runtime) -----------------------


@pytest.mark.parametrize(
    ("xml", "weights"),
    [
        ("<x/>", b"0"),  # the adversarial run's: any XML, any bytes
        (ir_xml(), IR_BIN[:4]),  # the weights the .xml points to are not in the .bin
        (ir_xml().replace('type="Add"', 'type="NoSuchOp"'), IR_BIN),
        ("<net", IR_BIN),  # not even XML
    ],
    ids=["junk", "short-bin", "unknown-op", "not-xml"],
)
def test_an_openvino_model_openvino_cannot_read_is_refused(
    tmp_path: Path, xml: str, weights: bytes
) -> None:
    archive = openvino_zip(tmp_path / "m.zip", GOOD_METADATA, xml=xml, weights=weights)

    message = refused(tmp_path, archive)

    assert str(tmp_path) not in message  # the runtime's reason, without the server's paths


def test_another_frameworks_file_named_xml_is_not_an_openvino_model(tmp_path: Path) -> None:
    # OpenVINO's read_model would take an ONNX file by its content, whatever its name.
    archive = openvino_zip(tmp_path / "m.zip", GOOD_METADATA, xml=onnx_model((1, 3, 64, 64)))

    assert "not an OpenVINO IR" in refused(tmp_path, archive)


@pytest.mark.parametrize(
    ("shape", "metadata", "reason"),
    [
        ((1, 3, 320, 320), GOOD_METADATA, "not the imgsz 64"),
        ((4, 3, 64, 64), GOOD_METADATA, "not the batch 1"),
        ((1, 3, 64, 64), GOOD_METADATA.replace("args: {}", "args: {dynamic: true}"), "dynamic"),
        ((1, 64, 64), GOOD_METADATA, "not a batch of images"),
    ],
    ids=["imgsz", "batch", "claims-dynamic", "rank-3"],
)
def test_an_openvino_model_whose_input_is_not_what_its_metadata_says_is_refused(
    tmp_path: Path, shape: tuple[int, ...], metadata: str, reason: str
) -> None:
    archive = openvino_zip(tmp_path / "m.zip", metadata, xml=ir_xml(shape))

    assert reason in refused(tmp_path, archive)


def test_a_dynamic_openvino_model_runs_any_size_and_batch(tmp_path: Path) -> None:
    metadata = GOOD_METADATA.replace("args: {}", "args: {dynamic: true, half: false, int8: null}")
    meta = described(tmp_path, openvino_zip(tmp_path / "m.zip", metadata, xml=ir_xml(DYNAMIC)))

    assert (meta.imgsz, meta.batch, meta.dynamic, meta.half, meta.int8) == (
        64,
        1,
        True,
        False,
        False,
    )


def onnx_model(
    shape: Sequence[int | str],
    props: dict[str, str] | None = None,
    *,
    op: str = "Add",
    external_constant: bool = False,
) -> bytes:
    """A real ONNX model: images (`shape`; a name is a dynamic size) + ones -> out, with
    ultralytics-like metadata (`props` replace or add entries; "" removes one)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    ones = numpy_helper.from_array(np.ones((1, 3, 1, 1), np.float32), "ones")
    nodes = [helper.make_node(op, ["images", "ones"], ["out"])]
    initializers = [ones]
    if external_constant:  # a Constant's value read from a file the model names
        value = TensorProto(name="value", data_type=TensorProto.FLOAT, dims=[1, 3, 1, 1])
        value.data_location = TensorProto.EXTERNAL
        value.external_data.add(key="location", value="../../etc/weights.bin")
        nodes = [helper.make_node("Constant", [], ["ones"], value=value), *nodes]
        initializers = []
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    metadata = {
        "task": "detect",
        "batch": "1",
        "imgsz": "[64, 64]",
        "names": "{0: 'cat', 1: 'dog'}",
        "args": "{'dynamic': False, 'quantize': None}",
        **(props or {}),
    }
    onnx.helper.set_model_props(model, {k: v for k, v in metadata.items() if v})
    data: bytes = model.SerializeToString()
    return data


def onnx_described(tmp_path: Path, data: bytes) -> ExportedMetadata:
    path = tmp_path / "model.onnx"
    path.write_bytes(data)
    return describe(path, ExportFormat.ONNX, max_names=2)


def onnx_refused(tmp_path: Path, data: bytes) -> str:
    return refusal(tmp_path, lambda: onnx_described(tmp_path, data))


def test_good_onnx_models_are_described(tmp_path: Path) -> None:
    static = onnx_described(tmp_path, onnx_model((1, 3, 64, 64)))
    dynamic = onnx_described(
        tmp_path,
        onnx_model(("batch", 3, "height", "width"), {"args": "{'dynamic': True}"}),
    )

    assert (static.class_names, static.imgsz, static.batch, static.dynamic) == (
        ("cat", "dog"),
        64,
        1,
        False,
    )
    assert dynamic.dynamic


def _metadata_only() -> bytes:
    import onnx

    model = onnx.ModelProto()
    onnx.helper.set_model_props(
        model, {"task": "detect", "batch": "1", "imgsz": "[64, 64]", "names": "{0: 'cat'}"}
    )
    data: bytes = model.SerializeToString()
    return data


def test_an_onnx_file_that_is_only_metadata_is_refused(tmp_path: Path) -> None:
    # onnx.load parses it (every field of a protobuf is optional); ONNX Runtime finds no graph.
    assert "ONNX Runtime cannot load it" in onnx_refused(tmp_path, _metadata_only())


def test_an_onnx_model_with_an_op_onnx_runtime_does_not_know_is_refused(tmp_path: Path) -> None:
    data = onnx_model((1, 3, 64, 64), op="NoSuchOp")

    assert "ONNX Runtime cannot load it" in onnx_refused(tmp_path, data)


def test_an_onnx_constant_kept_in_an_external_file_is_refused(tmp_path: Path) -> None:
    data = onnx_model((1, 3, 64, 64), external_constant=True)

    assert "external files" in onnx_refused(tmp_path, data)


@pytest.mark.parametrize(
    ("shape", "props", "reason"),
    [
        ((1, 3, 320, 320), {}, "not the imgsz 64"),
        ((2, 3, 64, 64), {}, "not the batch 1"),
        ((1, 3, 64, 64), {"args": "{'dynamic': True}"}, "dynamic"),
    ],
    ids=["imgsz", "batch", "claims-dynamic"],
)
def test_an_onnx_model_whose_input_is_not_what_its_metadata_says_is_refused(
    tmp_path: Path, shape: tuple[int, ...], props: dict[str, str], reason: str
) -> None:
    assert reason in onnx_refused(tmp_path, onnx_model(shape, props))


# -- The metadata's bounds ------------------------------------------------------------------


def _with(**entries: str) -> str:
    lines = {"task": "detect", "batch": "1", "imgsz": "[64, 64]", "names": "{0: cat, 1: dog}"}
    lines["args"] = "{}"
    lines.update(entries)
    return "".join(f"{key}: {value}\n" for key, value in lines.items())


@pytest.mark.parametrize(
    "metadata",
    [
        _with(imgsz="[-64, -64]"),
        _with(imgsz="[0, 0]"),
        _with(imgsz="[true, true]"),  # a bool is an int to Python
        _with(imgsz="true"),
        _with(imgsz=str(10**29)),  # 30 digits
        _with(imgsz=f"[{IMGSZ_RANGE[1] + 32}, {IMGSZ_RANGE[1] + 32}]"),
        _with(imgsz=f"{IMGSZ_RANGE[0] - 1}"),
        _with(batch=str(10**30)),
        _with(batch=str(BATCH_RANGE[1] + 1)),  # every call would pad to that many images
        _with(batch="100000"),
        _with(batch="0"),
        _with(batch="true"),
        _with(args="{dynamic: 'yes'}"),
        _with(args="{dynamic: 'false'}"),
        _with(args="{half: [1]}"),
        _with(args="{int8: 1}"),
        _with(imgsz="4096", batch="1024"),  # each within its range, 192 GiB together
    ],
    ids=[
        "imgsz-negative",
        "imgsz-zero",
        "imgsz-bools",
        "imgsz-bool",
        "imgsz-30-digits",
        "imgsz-above-range",
        "imgsz-below-range",
        "batch-30-digits",
        "batch-above-range",
        "batch-100000",
        "batch-zero",
        "batch-bool",
        "dynamic-string",
        "dynamic-string-false",
        "half-list",
        "int8-int",
        "input-too-large",
    ],
)
def test_metadata_out_of_bounds_or_of_the_wrong_type_is_refused(
    tmp_path: Path, metadata: str
) -> None:
    # A model that takes any size and batch: only the metadata can be what is refused.
    refused(tmp_path, openvino_zip(tmp_path / "m.zip", metadata, xml=ir_xml(DYNAMIC)))


@pytest.mark.parametrize(
    "props",
    [{"imgsz": "[True, True]"}, {"batch": str(10**30)}, {"args": "{'half': 'yes'}"}],
    ids=["imgsz-bools", "batch-30-digits", "half-string"],
)
def test_onnx_metadata_out_of_bounds_or_of_the_wrong_type_is_refused(
    tmp_path: Path, props: dict[str, str]
) -> None:
    onnx_refused(tmp_path, onnx_model(("batch", 3, "height", "width"), props))


def test_metadata_at_the_edges_of_the_bounds_is_accepted(tmp_path: Path) -> None:
    low, high = IMGSZ_RANGE
    dynamic = ir_xml(DYNAMIC)
    smallest = openvino_zip(tmp_path / "a.zip", _with(imgsz=f"[{low}, {low}]"), xml=dynamic)
    largest = openvino_zip(tmp_path / "b.zip", _with(imgsz=str(high)), xml=dynamic)
    most_images = openvino_zip(
        tmp_path / "d.zip", _with(imgsz="128", batch=str(BATCH_RANGE[1])), xml=dynamic
    )
    unrecorded = openvino_zip(
        tmp_path / "c.zip",
        _with(args="{dynamic: null, half: null, int8: null}").replace("batch: 1\n", ""),
        xml=dynamic,
    )

    assert described(tmp_path / "a", smallest).imgsz == low
    assert described(tmp_path / "b", largest).imgsz == high
    assert described(tmp_path / "d", most_images).batch == BATCH_RANGE[1]
    meta = described(tmp_path / "c", unrecorded)
    assert (meta.batch, meta.dynamic, meta.half, meta.int8) == (1, False, False, False)


# -- Through the API: the adversarial run's reproduction -------------------------------------


async def test_a_junk_openvino_upload_is_refused_and_nothing_is_stored(
    api: httpx.AsyncClient, tmp_path: Path
) -> None:
    metadata = THREE_CLASSES + "args: {}\n"
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("model.xml", "<x/>")
        zipped.writestr("model.bin", "0")
        zipped.writestr("metadata.yaml", metadata)
    files = {"file": ("junk.zip", archive.getvalue())}
    bounds = io.BytesIO()
    with zipfile.ZipFile(bounds, "w") as zipped:  # a readable model, metadata out of bounds
        zipped.writestr("model.xml", ir_xml(DYNAMIC))
        zipped.writestr("model.bin", IR_BIN)
        zipped.writestr("metadata.yaml", metadata.replace("batch: 1", f"batch: {10**30}"))

    junk = await api.post("/v1/models/tiny/variants", files=files)
    huge = await api.post("/v1/models/tiny/variants", files={"file": ("b.zip", bounds.getvalue())})

    assert "OpenVINO" in assert_problem(junk, 422, "invalid_variant")["detail"]
    assert "batch" in assert_problem(huge, 422, "invalid_variant")["detail"]
    model = await api.get("/v1/models/tiny")
    assert model.json()["variants"] == []
