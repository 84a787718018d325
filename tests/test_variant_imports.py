"""Exported files from clients: every way an archive or its metadata is hostile or broken is a 422
`invalid_variant`, found without expanding what it would expand to."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from yolo_orch.errors import InvalidJob
from yolo_orch.variant_imports import describe, unpack_openvino_zip
from yolo_orch.variants import ExportFormat

GOOD_METADATA = "task: detect\nbatch: 1\nimgsz: [64, 64]\nnames: {0: cat, 1: dog}\nargs: {}\n"


def openvino_zip(path: Path, metadata: str, *, method: int = zipfile.ZIP_STORED) -> Path:
    with zipfile.ZipFile(path, "w", compression=method) as zipped:
        zipped.writestr("m.xml", "<net/>")
        zipped.writestr("m.bin", b"\0" * 64)
        zipped.writestr("metadata.yaml", metadata)
    return path


def described(tmp_path: Path, archive: Path) -> object:
    target = tmp_path / "unpacked"
    unpack_openvino_zip(archive, target, max_bytes=1 << 20)
    return describe(target, ExportFormat.OPENVINO, max_names=2)


def refused(tmp_path: Path, archive: Path) -> str:
    with pytest.raises(InvalidJob) as caught:
        described(tmp_path, archive)
    assert caught.value.code == "invalid_variant"
    assert len(caught.value.message) < 500
    return caught.value.message


def test_a_good_archive_is_described(tmp_path: Path) -> None:
    meta = described(tmp_path, openvino_zip(tmp_path / "ok.zip", GOOD_METADATA))

    assert getattr(meta, "class_names", None) == ("cat", "dog")


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


def _patched(archive: Path, offset_in_header: int, value: bytes) -> Path:
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


def test_an_encrypted_archive_is_refused(tmp_path: Path) -> None:
    archive = _patched(openvino_zip(tmp_path / "enc.zip", GOOD_METADATA), 6, b"\x01\x00")

    refused(tmp_path, archive)


def test_a_compression_zipfile_does_not_implement_is_refused(tmp_path: Path) -> None:
    archive = _patched(openvino_zip(tmp_path / "d64.zip", GOOD_METADATA), 8, b"\x09\x00")

    refused(tmp_path, archive)


def test_damaged_compressed_data_is_refused(tmp_path: Path) -> None:
    archive = openvino_zip(tmp_path / "bad.zip", GOOD_METADATA, method=zipfile.ZIP_DEFLATED)
    data = bytearray(archive.read_bytes())
    start = data.find(b"m.bin") + len("m.bin")  # the first member's compressed bytes follow
    data[start : start + 8] = b"\xff" * 8
    archive.write_bytes(bytes(data))

    refused(tmp_path, archive)
