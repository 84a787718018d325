"""Exported files a client brings: what they are, read without running code from them.

Only ONNX and OpenVINO are accepted (see `variants.IMPORTABLE_FORMATS`). The ultralytics metadata
they carry (task, class names, size) must agree with the model they are imported as a variant of.
"""

from __future__ import annotations

import ast
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from yolo_orch import safe_yaml
from yolo_orch.class_names import in_id_order
from yolo_orch.errors import ExportDependencyMissing, InvalidJob
from yolo_orch.variants import ENTRY_NAMES, UNIMPORTABLE_SUFFIXES, ExportFormat

MAX_ARCHIVE_MEMBERS = 16
CHUNK_BYTES = 1 << 20
MAX_METADATA_BYTES = 1 << 20
"""Of an OpenVINO model's metadata.yaml, and of each ultralytics entry in an ONNX file's
metadata: the class names of a model fit (they are under `max_class_names_bytes`)."""
METADATA_NODES_BESIDES_NAMES = 1000


@dataclass(frozen=True)
class ExportedMetadata:
    task: str
    class_names: tuple[str, ...]
    imgsz: int
    batch: int
    dynamic: bool
    half: bool
    int8: bool


def importable_format(file_name: str) -> ExportFormat:
    """The format an uploaded or named file is imported as; refuses the ones that run code."""
    lowered = file_name.lower()
    for suffix, export_format in UNIMPORTABLE_SUFFIXES.items():
        if lowered.endswith(suffix):
            raise InvalidJob(
                f"{export_format} files cannot be imported: loading one deserialises code into the "
                "server. Import the .pt and export it here instead (POST /v1/jobs, kind export)",
                code="format_not_importable",
            )
    if lowered.endswith(".onnx"):
        return ExportFormat.ONNX
    if lowered.endswith(".zip") or lowered.endswith("_openvino_model") or lowered.endswith("/"):
        return ExportFormat.OPENVINO
    raise InvalidJob(
        f"{file_name!r}: a variant is an .onnx file, or an OpenVINO model (a .zip of its .xml, "
        ".bin and metadata.yaml, or a folder under a model root)",
        code="unsupported_variant_file",
    )


def describe(entry: Path, export_format: ExportFormat, max_names: int) -> ExportedMetadata:
    """The ultralytics metadata of a staged ONNX file or OpenVINO folder, whose class names
    are read only up to `max_names` of them (the model's count: a variant with more is not one
    of it)."""
    if export_format is ExportFormat.ONNX:
        return _describe_onnx(entry)
    if export_format is ExportFormat.OPENVINO:
        return _describe_openvino(entry, max_names)
    raise InvalidJob(f"{export_format} files cannot be imported", code="format_not_importable")


def unpack_openvino_zip(archive: Path, target: Path, max_bytes: int) -> None:
    """Extract an OpenVINO model (its files flat, or in one folder) into the new folder `target`."""
    try:
        with zipfile.ZipFile(archive) as zipped:
            members = [info for info in zipped.infolist() if not info.is_dir()]
            if not members or len(members) > MAX_ARCHIVE_MEMBERS:
                raise _bad_archive(f"it holds {len(members)} files")
            if sum(info.file_size for info in members) > max_bytes:
                raise _bad_archive(f"its files add up to more than {max_bytes} bytes")
            parents = {PurePosixPath(info.filename).parent for info in members}
            if len(parents) != 1 or len(next(iter(parents)).parts) > 1:
                raise _bad_archive("its files must sit together, at the top or in one folder")
            target.mkdir(parents=True)
            left = max_bytes  # what the entries declare can lie: count what is written
            for info in members:
                name = PurePosixPath(info.filename).name
                if name in {"", ".", ".."} or "\\" in name:
                    raise _bad_archive(f"it holds a file named {info.filename!r}")
                try:
                    with zipped.open(info) as reader, (target / name).open("xb") as writer:
                        while chunk := reader.read(min(CHUNK_BYTES, left + 1)):
                            left -= len(chunk)
                            if left < 0:
                                raise _bad_archive(f"it unpacks to more than {max_bytes} bytes")
                            writer.write(chunk)
                except FileExistsError:
                    raise _bad_archive(f"it holds two files named {name!r}") from None
    # What zipfile raises for an archive it cannot read: damaged, encrypted (RuntimeError),
    # compressed in a way it does not implement (deflate64, ...).
    except (zipfile.BadZipFile, zlib.error, EOFError, RuntimeError, NotImplementedError) as e:
        raise _bad_archive(f"{type(e).__name__}: {e}") from None


def entry_of(folder: Path, export_format: ExportFormat) -> Path:
    """The file or folder ultralytics loads, inside a variant's folder."""
    return folder / ENTRY_NAMES[export_format]


def _describe_onnx(path: Path) -> ExportedMetadata:
    try:
        import onnx
    except ImportError:
        raise ExportDependencyMissing("onnx", "importing an ONNX model") from None
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # a file from outside: every way it fails to parse is a bad file
        raise _bad_variant(f"it is not an ONNX model ({type(e).__name__})") from None
    # External data would be read from paths the file names, anywhere on this host.
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer):
        raise _bad_variant("it keeps weights in external files; import a single-file model")
    props = {prop.key: prop.value for prop in model.metadata_props}
    if any(
        len(props.get(key, "")) > MAX_METADATA_BYTES for key in ("names", "imgsz", "batch", "args")
    ):
        raise _bad_variant(f"its metadata takes more than {MAX_METADATA_BYTES} bytes")
    try:
        values = {key: ast.literal_eval(props[key]) for key in ("names", "imgsz", "batch")}
        args = ast.literal_eval(props.get("args", "{}"))
    # literal_eval builds what it parses: a nesting too deep is a RecursionError or MemoryError
    except (KeyError, ValueError, SyntaxError, RecursionError, MemoryError):
        raise _bad_variant("it carries no ultralytics metadata (names, imgsz, batch)") from None
    return _metadata({"task": props.get("task"), **values, "args": args})


def _describe_openvino(folder: Path, max_names: int) -> ExportedMetadata:
    xmls = sorted(folder.glob("*.xml"))
    if len(xmls) != 1 or not xmls[0].with_suffix(".bin").is_file():
        raise _bad_variant("an OpenVINO model is one .xml with its .bin")
    try:
        raw = safe_yaml.load_file(
            folder / "metadata.yaml",
            max_bytes=MAX_METADATA_BYTES,
            max_nodes=2 * max_names + METADATA_NODES_BESIDES_NAMES,
        )
    except safe_yaml.YamlRefused as e:
        raise _bad_variant(f"its metadata.yaml is refused: {e}") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        raise _bad_variant("it has no readable metadata.yaml") from None
    if not isinstance(raw, dict):
        raise _bad_variant("its metadata.yaml is not a mapping")
    return _metadata(raw)


def _metadata(raw: dict[str, Any]) -> ExportedMetadata:
    names, imgsz, args = raw.get("names"), raw.get("imgsz"), raw.get("args")
    args = args if isinstance(args, dict) else {}
    ordered = in_id_order(names) if isinstance(names, dict) else None
    if ordered is None:
        raise _bad_variant("its class names are not ids 0..n-1")
    sizes = imgsz if isinstance(imgsz, list | tuple) else [imgsz]
    square = {size for size in sizes if isinstance(size, int)}
    if len(square) != 1 or len(sizes) != len([s for s in sizes if isinstance(s, int)]):
        raise _bad_variant(f"imgsz {repr(imgsz)[:80]} is not one square size")
    batch = raw.get("batch") or 1
    if not isinstance(batch, int) or batch < 1:
        raise _bad_variant(f"batch {repr(batch)[:80]} is not a positive integer")
    quantize = args.get("quantize")
    return ExportedMetadata(
        task=str(raw.get("task") or "detect"),
        class_names=tuple(str(name) for name in ordered),
        imgsz=square.pop(),
        batch=batch,
        dynamic=bool(args.get("dynamic")),
        half=quantize in (16, "16", "fp16") or bool(args.get("half")),
        int8=quantize in (8, "8", "int8") or bool(args.get("int8")),
    )


def _bad_variant(reason: str) -> InvalidJob:
    return InvalidJob(f"the file is not a usable exported model: {reason}", code="invalid_variant")


def _bad_archive(reason: str) -> InvalidJob:
    return InvalidJob(f"the archive is not an OpenVINO model: {reason}", code="invalid_variant")
