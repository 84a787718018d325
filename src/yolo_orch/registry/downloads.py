"""The files the download routes serve, each checked against its fingerprint first: a model's
`.pt`, a variant's one file, or a zip of an OpenVINO variant's folder.

Checking reads the whole file. A download resumed with `Range`, or fetched in parts, asks for
the same file many times, so a file's digest is remembered with what `stat` says of it (device,
inode, size, modification and change times) and read again only once any of those changed: a
write changes the change time, which no one can set back, and a file put in its place is
another inode.

An OpenVINO variant is a folder; it is served as a zip built once into
`{models_dir}/downloads/{variant id}.{its SHA-256}.zip` rather than on the fly: a `Range`
request, and an ETag of what is served, need the bytes fixed before the first is sent. Files are
stored, not deflated (a model's weights are floats, which deflate by a few percent), so the zip
costs one copy of the variant on disk, made on its first download and removed with the variant.
The zip's entries carry a fixed date, so a zip built again (the cache removed) has the same
bytes and ETag.
"""

from __future__ import annotations

import hashlib
import os
import threading
import uuid
import zipfile
from collections import OrderedDict
from pathlib import Path

from yolo_orch.domain.variants import ENTRY_NAMES, ExportFormat, Variant
from yolo_orch.errors import ModelTampered
from yolo_orch.ops.retention import STAGING_PREFIX
from yolo_orch.registry.manifests import verify_tree
from yolo_orch.registry.weights import sha256_file

__all__ = ["HASHES", "FileHashes", "download_name", "openvino_zip", "remove_zips", "verify_file"]

_CHUNK = 1 << 20
_ZIP_DATE = (1980, 1, 1, 0, 0, 0)
"""The earliest date a zip entry can carry: entries dated alike make a rebuilt zip the same."""

_Signature = tuple[int, int, int, int, int]


class FileHashes:
    """SHA-256 digests of files, each kept with the `stat` signature it was read under, for the
    `capacity` files read most recently. Thread-safe."""

    def __init__(self, capacity: int = 4096) -> None:
        self._capacity = capacity
        self._known: OrderedDict[Path, tuple[_Signature, str]] = OrderedDict()
        self._lock = threading.Lock()

    def sha256(self, path: Path) -> str:
        """Blocking. `FileNotFoundError` when there is no file."""
        before = _signature(path)
        with self._lock:
            known = self._known.get(path)
            if known is not None and known[0] == before:
                self._known.move_to_end(path)
                return known[1]
        digest = sha256_file(path)
        if _signature(path) == before:  # not written to while it was read: worth keeping
            with self._lock:
                self._known[path] = (before, digest)
                self._known.move_to_end(path)
                if len(self._known) > self._capacity:
                    self._known.popitem(last=False)
        return digest

    def known_or_missing(self, path: Path) -> str:
        """`sha256`, or "missing" where there is no regular file (as `verify_tree` says it)."""
        try:
            return self.sha256(path) if path.is_file() else "missing"
        except FileNotFoundError:
            return "missing"


HASHES = FileHashes()
"""The process's: the download routes of every app in it share the files' digests."""


def verify_file(path: Path, sha256: str, hashes: FileHashes = HASHES) -> None:
    """Blocking; `ModelTampered` unless `path` is a file with that SHA-256."""
    actual = hashes.known_or_missing(path)
    if actual != sha256:
        raise ModelTampered(path, sha256, actual)


def download_name(model_name: str, variant: Variant | None = None) -> str:
    """What a download is called: `<model>.pt`; a variant's `<model>-<format>.<suffix>`
    (`.onnx`, `.torchscript`, `.engine`); an OpenVINO variant's `<model>_openvino_model.zip`, as
    ultralytics names the folder (its name tells ultralytics the format)."""
    if variant is None:
        return f"{model_name}.pt"
    if variant.format is ExportFormat.OPENVINO:
        return f"{model_name}_openvino_model.zip"
    return f"{model_name}-{variant.format}{Path(ENTRY_NAMES[variant.format]).suffix}"


def openvino_zip(
    folder: Path, variant: Variant, downloads: Path, hashes: FileHashes = HASHES
) -> tuple[Path, str]:
    """Blocking. The zip of the OpenVINO variant in `folder` and its SHA-256, built if not there
    yet: the variant's files as its manifest names them (`model_openvino_model/model.xml`,
    `.bin`, `metadata.yaml`), the folder ultralytics loads once unzipped, and what the variant
    import takes. The variant's folder is checked first (`ModelTampered`)."""
    verify_tree(folder, variant.files, variant.sha256, hashes.known_or_missing)
    with _building:  # one build at a time: two requests for a new zip build it once
        cached = _cached_zip(downloads, variant.id, hashes)
        if cached is not None:
            return cached
        downloads.mkdir(parents=True, exist_ok=True)
        # A crash leaves this name to the retention sweep of staged files.
        staged = downloads / f"{STAGING_PREFIX}{uuid.uuid4().hex}.zip"
        try:
            _write_zip(folder, variant, staged)
            digest = sha256_file(staged)
            final = downloads / f"{variant.id}.{digest}.zip"
            os.replace(staged, final)
        finally:
            staged.unlink(missing_ok=True)
    return final, digest


def remove_zips(downloads: Path, variant_id: str) -> None:
    """Blocking: the variant's zip, once the variant is gone."""
    for path in downloads.glob(f"{variant_id}.*.zip"):
        path.unlink(missing_ok=True)


_building = threading.Lock()


def _cached_zip(downloads: Path, variant_id: str, hashes: FileHashes) -> tuple[Path, str] | None:
    """The zip built before, if its bytes still have the digest its name carries; a zip that
    does not is removed (and built again)."""
    for path in downloads.glob(f"{variant_id}.*.zip"):
        expected = path.name.removeprefix(f"{variant_id}.").removesuffix(".zip")
        if hashes.known_or_missing(path) == expected:
            return path, expected
        path.unlink(missing_ok=True)
    return None


def _write_zip(folder: Path, variant: Variant, target: Path) -> None:
    """The variant's files, each hashed as it is copied: one that changed since `openvino_zip`
    checked the folder is `ModelTampered` too."""
    with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as archive:
        for name, expected in sorted(variant.files.items()):
            source = folder / name
            info = zipfile.ZipInfo(name, date_time=_ZIP_DATE)
            info.external_attr = 0o644 << 16
            info.file_size = source.stat().st_size  # zipfile picks zip64 from the size
            digest = _copy_hashing(source, archive, info)
            if digest != expected:
                raise ModelTampered(source, expected, digest)


def _copy_hashing(source: Path, archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> str:
    digest = hashlib.sha256()
    with source.open("rb") as reader, archive.open(info, "w") as writer:
        while chunk := reader.read(_CHUNK):
            digest.update(chunk)
            writer.write(chunk)
    return digest.hexdigest()


def _signature(path: Path) -> _Signature:
    info = os.stat(path)
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
