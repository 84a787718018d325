"""Exported files a client brings: what they are, read without running code from them.

Only ONNX and OpenVINO are accepted (see `variants.IMPORTABLE_FORMATS`). The ultralytics metadata
they carry (task, class names, size) must agree with the model they are imported as a variant of,
stay within what a job here could ask for (`params.common`), and agree with the model's
input; and the model itself is read once by the runtime that will run it (ONNX Runtime, OpenVINO),
so that a file the runtime cannot read is refused at import rather than failing every job that
`format: auto` would give it. Reading a model builds its graph; it runs nothing from it.
"""

from __future__ import annotations

import ast
import os
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import yaml

from yolo_orch.domain.variants import ENTRY_NAMES, UNIMPORTABLE_SUFFIXES, ExportFormat
from yolo_orch.errors import ErrorCode, ExportDependencyMissing, InvalidJob
from yolo_orch.files import safe_yaml
from yolo_orch.files.class_names import in_id_order
from yolo_orch.files.shown_paths import ShownPaths
from yolo_orch.params.common import EXPORT_BATCH_MAX, IMGSZ_MAX, IMGSZ_MIN
from yolo_orch.params.export import input_refusal

if TYPE_CHECKING:
    import onnx

MAX_ARCHIVE_MEMBERS = 16
CHUNK_BYTES = 1 << 20
MAX_EXPANSION = 10
"""An OpenVINO archive may unpack to this many times its own size, plus `EXPANSION_SLACK`: a
model's weights (the `.bin`, floats) deflate by a few percent and its `.xml` is a small part of
it, so a real model's archive expands by less than 2x; zeros deflate a thousandfold (a 7.5 MB
archive held a 900 MiB `.bin`). Counted on what is written, not on what the archive declares."""
EXPANSION_SLACK = 1 << 20
OPENVINO_FILES = "one .xml, the .bin of the same name and metadata.yaml"
"""What an OpenVINO model is, as a folder or an archive: nothing else."""
ENTRY_FILES = 3
"""How many files `OPENVINO_FILES` are."""
MAX_METADATA_BYTES = 1 << 20
"""Of an OpenVINO model's metadata.yaml, and of each ultralytics entry in an ONNX file's
metadata: the class names of a model fit (they are under `max_class_names_bytes`)."""
METADATA_NODES_BESIDES_NAMES = 1000
FLAGS = ("dynamic", "half", "int8")
"""The export options in a variant's metadata `args` that its lineage records."""


IMGSZ_RANGE = (IMGSZ_MIN, IMGSZ_MAX)
"""An imported variant's size: one a job here could ask for."""
BATCH_RANGE = (1, EXPORT_BATCH_MAX)
"""An imported variant's batch: one an export here could be built for."""


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
                code=ErrorCode.FORMAT_NOT_IMPORTABLE,
            )
    if lowered.endswith(".onnx"):
        return ExportFormat.ONNX
    if lowered.endswith(".zip") or lowered.endswith("_openvino_model") or lowered.endswith("/"):
        return ExportFormat.OPENVINO
    raise InvalidJob(
        f"{file_name!r}: a variant is an .onnx file, or an OpenVINO model (a .zip of its .xml, "
        ".bin and metadata.yaml, or a folder under a model root)",
        code=ErrorCode.UNSUPPORTED_VARIANT_FILE,
    )


def describe(entry: Path, export_format: ExportFormat, max_names: int) -> ExportedMetadata:
    """The ultralytics metadata of a staged ONNX file or OpenVINO folder, whose class names
    are read only up to `max_names` of them (the model's count: a variant with more is not one
    of it)."""
    if export_format is ExportFormat.ONNX:
        return _describe_onnx(entry)
    if export_format is ExportFormat.OPENVINO:
        return _describe_openvino(entry, max_names)
    raise InvalidJob(
        f"{export_format} files cannot be imported", code=ErrorCode.FORMAT_NOT_IMPORTABLE
    )


def unpack_openvino_zip(archive: Path, target: Path, max_bytes: int) -> None:
    """Extract an OpenVINO model (its files flat, or in one folder) into the new folder `target`:
    at most `max_bytes`, and at most `MAX_EXPANSION` times the archive's size."""
    size = archive.stat().st_size
    bound = min(max_bytes, MAX_EXPANSION * size + EXPANSION_SLACK)
    too_large = (
        f"it unpacks to more than {bound} bytes (at most {MAX_EXPANSION}x the archive's "
        f"{size} bytes plus {EXPANSION_SLACK >> 20} MiB, and max_upload_bytes {max_bytes})"
    )
    try:
        with zipfile.ZipFile(archive) as zipped:
            members = [info for info in zipped.infolist() if not info.is_dir()]
            if not members or len(members) > MAX_ARCHIVE_MEMBERS:
                raise _bad_archive(f"it holds {len(members)} files")
            if reason := _openvino_names_refusal({PurePosixPath(i.filename).name for i in members}):
                raise _bad_archive(reason)
            if sum(info.file_size for info in members) > bound:
                raise _bad_archive(too_large)
            parents = {PurePosixPath(info.filename).parent for info in members}
            if len(parents) != 1 or len(next(iter(parents)).parts) > 1:
                raise _bad_archive("its files must sit together, at the top or in one folder")
            target.mkdir(parents=True)
            left = bound  # what the entries declare can lie: count what is written
            for info in members:
                name = PurePosixPath(info.filename).name
                if name in {"", ".", ".."} or "\\" in name:
                    raise _bad_archive(f"it holds a file named {info.filename!r}")
                try:
                    with zipped.open(info) as reader, (target / name).open("xb") as writer:
                        while chunk := reader.read(min(CHUNK_BYTES, left + 1)):
                            left -= len(chunk)
                            if left < 0:
                                raise _bad_archive(too_large)
                            writer.write(chunk)
                except FileExistsError:
                    raise _bad_archive(f"it holds two files named {name!r}") from None
    # What zipfile raises for an archive it cannot read: damaged, encrypted (RuntimeError),
    # compressed in a way it does not implement (deflate64, ...).
    except (zipfile.BadZipFile, zlib.error, EOFError, RuntimeError, NotImplementedError) as e:
        raise _bad_archive(f"{type(e).__name__}: {e}") from None


def check_source(source: Path, export_format: ExportFormat, max_bytes: int) -> None:
    """Before a file or folder under a model root is copied in: an ONNX file of at most
    `max_bytes`, or an OpenVINO folder of `OPENVINO_FILES`, regular files adding up to at most
    `max_bytes` (what an upload may be)."""
    if export_format is not ExportFormat.OPENVINO:
        _check_size(os.stat(source).st_size, max_bytes)
        return
    check_openvino_folder(source)
    _check_size(sum(os.stat(path).st_size for path in source.iterdir()), max_bytes)


def check_openvino_folder(folder: Path) -> None:
    """`folder` holds `OPENVINO_FILES`, each a regular file, and nothing else; read without
    listing more than one entry past them."""
    names: set[str] = set()
    with os.scandir(folder) as entries:
        for entry in entries:
            if len(names) == ENTRY_FILES:
                raise _bad_variant(f"an OpenVINO model is {OPENVINO_FILES}, nothing else")
            if not entry.is_file(follow_symlinks=False):
                raise _bad_variant(f"{entry.name[:80]!r} in the folder is not a regular file")
            names.add(entry.name)
    if reason := _openvino_names_refusal(names):
        raise _bad_variant(reason)


def _openvino_names_refusal(names: set[str]) -> str | None:
    xmls = [name for name in names if name.endswith(".xml")]
    if len(xmls) == 1 and names == {xmls[0], f"{xmls[0][:-4]}.bin", "metadata.yaml"}:
        return None
    listed = ", ".join(repr(name[:40]) for name in sorted(names)[: ENTRY_FILES + 1])
    return f"an OpenVINO model is {OPENVINO_FILES}, nothing else; it holds {listed}"


def _check_size(size: int, max_bytes: int) -> None:
    if size > max_bytes:
        raise _bad_variant(f"it takes {size} bytes, more than max_upload_bytes ({max_bytes})")


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
    # External data would be read from paths the file names, anywhere on this host: in an
    # initializer, or in a tensor attribute (a Constant's value), of the graph, a subgraph or
    # a function.
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in _onnx_tensors(model)):
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
    del model  # ONNX Runtime reads the file again; keep one copy of the weights in memory
    metadata = _metadata({"task": props.get("task"), **values, "args": args})
    _check_input(_onnx_runtime_inputs(path), metadata)
    return metadata


def _onnx_tensors(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Every tensor stored in the model: initializers and tensor attributes, in the graph, its
    subgraphs (If, Loop, Scan bodies) and the model's functions."""
    graphs = [model.graph]
    nodes = [node for function in model.functions for node in function.node]
    while graphs or nodes:
        if graphs:
            graph = graphs.pop()
            yield from graph.initializer
            for sparse in graph.sparse_initializer:
                yield from (sparse.values, sparse.indices)
            nodes.extend(graph.node)
            continue
        for attribute in nodes.pop().attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            sparse_tensors = [*attribute.sparse_tensors]
            if attribute.HasField("sparse_tensor"):
                sparse_tensors.append(attribute.sparse_tensor)
            for sparse in sparse_tensors:
                yield from (sparse.values, sparse.indices)
            if attribute.HasField("g"):
                graphs.append(attribute.g)
            graphs.extend(attribute.graphs)


def _onnx_runtime_inputs(path: Path) -> list[list[int | None] | None]:
    """Load the file as the runner does (ONNX Runtime; here on the CPU, with no graph
    optimisation: one read, bounded by the file), and return its inputs' shapes."""
    try:
        import onnxruntime  # type: ignore[import-untyped]
    except ImportError:
        raise ExportDependencyMissing("onnxruntime", "importing an ONNX model") from None
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 3  # its complaints come back as the refusal's reason
    try:
        session = onnxruntime.InferenceSession(
            str(path), options, providers=["CPUExecutionProvider"]
        )
        return [_shape(node.shape) for node in session.get_inputs()]
    except Exception as e:  # a file from outside: every way it fails to load is a bad file
        raise _bad_variant(f"ONNX Runtime cannot load it ({_reason(e, path.parent)})") from None


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
    metadata = _metadata(raw)
    _check_input(_openvino_inputs(xmls[0]), metadata)
    return metadata


def _openvino_inputs(xml: Path) -> list[list[int | None] | None]:
    """Read the model as the runner does (`Core.read_model` of the .xml and its .bin; the
    weights are mapped, not copied), insisting that it is OpenVINO's own IR (`read_model` would
    take other frameworks' files too), and return its inputs' shapes."""
    try:
        import openvino
        from openvino.frontend import FrontEndManager
    except ImportError:
        raise ExportDependencyMissing("openvino", "importing an OpenVINO model") from None
    try:
        if not FrontEndManager().load_by_framework("ir").supported(str(xml)):
            raise _bad_variant(f"{xml.name[:80]!r} is not an OpenVINO IR model")
        model = openvino.Core().read_model(str(xml), str(xml.with_suffix(".bin")))
        return [_shape(node.get_partial_shape()) for node in model.inputs]
    except InvalidJob:
        raise
    except Exception as e:  # a file from outside: every way it fails to read is a bad file
        raise _bad_variant(f"OpenVINO cannot read it ({_reason(e, xml.parent)})") from None


def _shape(dims: Any) -> list[int | None] | None:
    """An input's shape from the runtime: each dimension's size, None where it is dynamic;
    None for a rank that is not fixed. ONNX Runtime gives a list of ints and names (or None),
    OpenVINO a PartialShape of Dimensions."""
    if dims is None or getattr(getattr(dims, "rank", None), "is_dynamic", False):
        return None
    sizes: list[int | None] = []
    for dim in dims:
        if type(dim) is int:
            sizes.append(dim if dim >= 0 else None)
        elif getattr(dim, "is_static", False):
            sizes.append(int(dim.get_length()))
        else:
            sizes.append(None)
    return sizes


def _check_input(inputs: Sequence[list[int | None] | None], metadata: ExportedMetadata) -> None:
    """The model takes one batch of images, (N, C, H, W), of the size and batch its metadata
    says: `auto` picks a variant by that metadata, so a model that takes another size, or a
    fixed one where the metadata says dynamic, would fail every job it is picked for."""
    if len(inputs) != 1:
        raise _bad_variant(f"it takes {len(inputs)} inputs, not one batch of images")
    shape = inputs[0]
    shown = repr(shape)[:80]
    if shape is None or len(shape) != 4:
        raise _bad_variant(f"its input {shown} is not a batch of images (N, C, H, W)")
    batch, _, height, width = shape
    if batch is not None and batch != metadata.batch:
        raise _bad_variant(f"its input {shown} is not the batch {metadata.batch} its metadata says")
    if any(size is not None and size != metadata.imgsz for size in (height, width)):
        raise _bad_variant(f"its input {shown} is not the imgsz {metadata.imgsz} its metadata says")
    if metadata.dynamic and (height is not None or width is not None):
        raise _bad_variant(f"its metadata says dynamic, but its input {shown} has a fixed size")


def _metadata(raw: dict[str, Any]) -> ExportedMetadata:
    names, imgsz, args = raw.get("names"), raw.get("imgsz"), raw.get("args")
    args = args if isinstance(args, dict) else {}
    ordered = in_id_order(names) if isinstance(names, dict) else None
    if ordered is None:
        raise _bad_variant("its class names are not ids 0..n-1")
    sizes = imgsz if isinstance(imgsz, list | tuple) else [imgsz]
    square = {_in_range(size, IMGSZ_RANGE) for size in sizes}
    size = square.pop() if len(square) == 1 else None
    if size is None:
        low, high = IMGSZ_RANGE
        raise _bad_variant(f"imgsz {repr(imgsz)[:80]} is not one square size from {low} to {high}")
    raw_batch = raw.get("batch")
    batch = _in_range(1 if raw_batch is None else raw_batch, BATCH_RANGE)  # None: not recorded
    if batch is None:
        low, high = BATCH_RANGE
        raise _bad_variant(f"batch {repr(raw_batch)[:80]} is not a batch from {low} to {high}")
    if reason := input_refusal(size, batch):  # what an export here could not be built for
        raise _bad_variant(reason)
    flags = {flag: args.get(flag) for flag in FLAGS}
    for flag, value in flags.items():
        if value is not None and not isinstance(value, bool):  # None: left unset, so false
            raise _bad_variant(f"args.{flag} {repr(value)[:80]} is not true or false")
    quantize = args.get("quantize")
    return ExportedMetadata(
        task=str(raw.get("task") or "detect"),
        class_names=tuple(str(name) for name in ordered),
        imgsz=size,
        batch=batch,
        dynamic=flags["dynamic"] is True,
        half=quantize in (16, "16", "fp16") or flags["half"] is True,
        int8=quantize in (8, "8", "int8") or flags["int8"] is True,
    )


def _in_range(value: object, bounds: tuple[int, int]) -> int | None:
    """`value` if it is an int within `bounds` (a bool, which Python counts as an int, is not)."""
    if type(value) is not int:
        return None
    low, high = bounds
    return value if low <= value <= high else None


def _reason(error: Exception, folder: Path) -> str:
    """A runtime's reason for refusing a file, short: its type and its last line that says
    something (OpenVINO's come after lines naming its own sources), without the server's path."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    last = ShownPaths([folder]).text(lines[-1]) if lines else ""
    return f"{type(error).__name__}: {last[:200]}"


def _bad_variant(reason: str) -> InvalidJob:
    return InvalidJob(
        f"the file is not a usable exported model: {reason}", code=ErrorCode.INVALID_VARIANT
    )


def _bad_archive(reason: str) -> InvalidJob:
    return InvalidJob(
        f"the archive is not an OpenVINO model: {reason}", code=ErrorCode.INVALID_VARIANT
    )
