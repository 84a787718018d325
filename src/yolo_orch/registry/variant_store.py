"""The registry's exported variants: their folders and their records.

Each variant lives in `{models_dir}/variants/{variant id}/`, holding the one file or folder that
ultralytics loads (`variants.ENTRY_NAMES`). Files are staged in a hidden folder beside it,
fingerprinted, and renamed into place before the record is added, so a half-written export is
never registered; a staged folder left by a crash is never read.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import TypeVar, TypeVarTuple

import anyio.to_thread

from yolo_orch.domain import Model
from yolo_orch.domain.variants import ExportFormat, Lineage, NewVariant, Variant
from yolo_orch.errors import BodyTooLarge, ErrorCode, InvalidJob, VariantNotFound
from yolo_orch.ops.clock import utcnow
from yolo_orch.registry.downloads import remove_zips
from yolo_orch.registry.manifests import Manifest, copy_tree_hashing, fingerprint_tree, remove_tree
from yolo_orch.registry.resolutions import Resolutions, ResolvedVariant
from yolo_orch.registry.variant_imports import (
    ExportedMetadata,
    check_openvino_folder,
    check_source,
    describe,
    entry_of,
    importable_format,
    unpack_openvino_zip,
)
from yolo_orch.registry.weights import ResolvedWeights
from yolo_orch.store.base import ModelStore

T = TypeVar("T")
Args = TypeVarTuple("Args")


CheckImport = Callable[[ResolvedWeights, Path, ExportFormat, ExportedMetadata], None]
"""Raises `InvalidJob` (`variant_mismatch`) when the staged file or folder (of this format and
metadata) does not reproduce the `.pt`. Blocking."""


class VariantRegistry:
    def __init__(
        self,
        store: ModelStore,
        variants_dir: Path,
        files_lock: asyncio.Lock,
        resolutions: Resolutions,
        *,
        weights_of: Callable[[Model], ResolvedWeights],
        check: CheckImport,
        limiter: anyio.CapacityLimiter | None = None,
        retire_after_failures: int = 3,
    ) -> None:
        """`weights_of`: a model's `.pt`, which an imported variant must reproduce (`check`).
        `limiter`: the threads for the file work of imports (None: anyio's default pool); an
        export job's registration uses the default pool, as a training's model does."""
        self._store = store
        self._weights_of = weights_of
        self._check = check
        self.retire_after_failures = retire_after_failures
        self._failures: dict[str, int] = {}
        """Consecutive `runtime_error` failures of each variant since its last success."""
        self._dir = variants_dir
        self.downloads_dir = variants_dir.parent / "downloads"
        """Where the download route keeps the zips it builds of OpenVINO variants
        (`downloads.openvino_zip`); a variant's goes with it."""
        self._files_lock = files_lock
        """The model registry's: held while folders and their records change together."""
        self._resolutions = resolutions
        """The model registry's: forgotten at every change to a variant."""
        self._limiter = limiter

    async def register_export(
        self,
        output: Path,
        model: Model,
        export_format: ExportFormat,
        lineage: Lineage,
        *,
        job_id: str,
        source: str,
        expected: Manifest,
    ) -> Variant:
        """Register what an export job wrote (`output`: a file, or OpenVINO's folder). The
        copy is fingerprinted as it is written and must match what the job fingerprinted."""
        staged = self._staging_dir()
        try:
            name = entry_of(staged, export_format).name
            if output.name != name:
                raise RuntimeError(f"an {export_format} export is named {name}, not {output.name}")
            manifest = await anyio.to_thread.run_sync(copy_tree_hashing, output, staged, name)
            if manifest.files != expected.files:
                raise RuntimeError(f"{output} changed while it was registered")
            new = NewVariant(
                model_id=model.id,
                format=export_format,
                sha256=manifest.digest,
                size_bytes=manifest.size_bytes,
                files=manifest.files,
                lineage=lineage,
                source=source,
                job_id=job_id,
            )
            return await self._install(staged, new)
        finally:
            await anyio.to_thread.run_sync(remove_tree, staged)

    async def import_upload(
        self, model: Model, chunks: AsyncIterator[bytes], file_name: str, max_bytes: int
    ) -> tuple[Variant, bool]:
        """An uploaded `.onnx` file or a `.zip` of an OpenVINO model, as a variant of `model`."""
        export_format = importable_format(file_name)
        staged = self._staging_dir()
        try:
            await self._in_thread(lambda: staged.mkdir(parents=True))
            received = staged / ("upload.zip" if export_format is ExportFormat.OPENVINO else "u")
            await _receive(chunks, received, max_bytes, self._limiter)
            entry = entry_of(staged, export_format)
            if export_format is ExportFormat.OPENVINO:
                await self._in_thread(unpack_openvino_zip, received, entry, max_bytes)
                await self._in_thread(received.unlink)
            else:
                await self._in_thread(os.replace, received, entry)
            return await self._import_staged(model, staged, export_format, "upload")
        finally:
            await self._in_thread(remove_tree, staged)

    async def import_path(
        self, model: Model, source: Path, export_format: ExportFormat, max_bytes: int
    ) -> tuple[Variant, bool]:
        """A file or OpenVINO folder found under the model roots, copied in once its shape and
        size are what a variant's can be (`check_source`)."""
        await self._in_thread(check_source, source, export_format, max_bytes)
        staged = self._staging_dir()
        try:
            name = entry_of(staged, export_format).name
            try:
                await self._in_thread(copy_tree_hashing, source, staged, name)
            except ValueError as e:  # a link or a special file inside the folder
                raise InvalidJob(str(e), code=ErrorCode.INVALID_VARIANT) from None
            return await self._import_staged(model, staged, export_format, f"path:{source}")
        finally:
            await self._in_thread(remove_tree, staged)

    async def list_for(self, model_id: str) -> list[Variant]:
        return await self._store.list_variants(model_id)

    async def resolve(self, model_id: str) -> list[ResolvedVariant]:
        """The model's usable variants, newest first, with their folders."""
        generation = self._resolutions.generation
        variants = await self._store.list_variants(model_id)
        resolved = [ResolvedVariant(v, self.folder_of(v)) for v in variants if v.usable]
        self._resolutions.keep_variants(model_id, resolved, generation)
        return resolved

    async def mark_unusable(self, variant_id: str, reason: str) -> None:
        self._failures.pop(variant_id, None)
        await self._store.mark_variant_unusable(variant_id, reason)
        self._resolutions.forget()

    async def record_runs(self, variant_id: str, failures: Sequence[str | None]) -> None:
        """Jobs that ran the variant, in order: None for one that succeeded, its message for
        one that failed `runtime_error` (a cancel, a timeout or a bad input says nothing about
        the variant). `retire_after_failures` of them in a row retire it, and `format: auto`
        picks the next fitting variant or the `.pt`; a success starts the count again. The
        counts live in this process: a restart starts them at 0."""
        count = self._failures.get(variant_id, 0)
        for failure in failures:
            count = 0 if failure is None else count + 1
            if failure is not None and count >= self.retire_after_failures:
                reason = (
                    f"retired after {count} consecutive jobs failed with runtime_error "
                    f"(variant_retire_after_failures); the last: {failure[:300]}"
                )
                with contextlib.suppress(VariantNotFound):  # deleted meanwhile
                    await self.mark_unusable(variant_id, reason)
                return
        if count:
            self._failures[variant_id] = count
        else:
            self._failures.pop(variant_id, None)

    async def delete(self, model: Model, variant_id: str) -> Variant:
        async with self._files_lock:
            variant = await self._store.get_variant(variant_id)
            if variant.model_id != model.id:
                raise VariantNotFound(variant_id)
            await self._store.delete_variant(variant_id)
            self._failures.pop(variant_id, None)
            self._resolutions.forget()
            await anyio.to_thread.run_sync(remove_tree, self.folder_of(variant))
            await anyio.to_thread.run_sync(remove_zips, self.downloads_dir, variant.id)
        return variant

    async def remove_folders(self, variants: list[Variant]) -> None:
        """After their records are gone (a cascade delete of their model)."""
        for variant in variants:
            await anyio.to_thread.run_sync(remove_tree, self.folder_of(variant))
            await anyio.to_thread.run_sync(remove_zips, self.downloads_dir, variant.id)

    def folder_of(self, variant: Variant) -> Path:
        return self._dir / variant.id

    async def _import_staged(
        self, model: Model, staged: Path, export_format: ExportFormat, source: str
    ) -> tuple[Variant, bool]:
        entry = entry_of(staged, export_format)
        if export_format is ExportFormat.OPENVINO:  # the source may have changed since its check
            await self._in_thread(check_openvino_folder, entry)
        meta = await self._in_thread(describe, entry, export_format, len(model.class_names))
        if (meta.task, meta.class_names) != (model.task, model.class_names):
            raise InvalidJob(
                f"the file is a {meta.task[:50]!r} model with classes "
                f"{_preview(meta.class_names)}; model {model.name!r} is a {model.task} model "
                f"with classes {_preview(model.class_names)}",
                code=ErrorCode.VARIANT_MISMATCH,
            )
        weights = self._weights_of(model)
        await self._in_thread(self._check, weights, entry, export_format, meta)
        manifest = await self._in_thread(fingerprint_tree, staged)
        lineage = Lineage(
            source_sha256=weights.sha256,
            imgsz=meta.imgsz,
            half=meta.half,
            int8=meta.int8,
            dynamic=meta.dynamic,
            batch=meta.batch,
            device=None,
        )
        new = NewVariant(
            model_id=model.id,
            format=export_format,
            sha256=manifest.digest,
            size_bytes=manifest.size_bytes,
            files=manifest.files,
            lineage=lineage,
            source=source,
        )
        variant = await self._install(staged, new)
        return variant, variant.id == new.id

    async def _install(self, staged: Path, new: NewVariant) -> Variant:
        """Rename the staged folder into place and register it; the folder goes again if the
        record is refused or one registered before is returned."""
        final = self._dir / new.id
        async with self._files_lock:
            await anyio.to_thread.run_sync(os.replace, staged, final)
            try:
                variant, created = await self._store.add_variant(new, utcnow())
                self._resolutions.forget()
            except BaseException:
                await anyio.to_thread.run_sync(remove_tree, final)
                raise
            if not created:
                await anyio.to_thread.run_sync(remove_tree, final)
        return variant

    async def _in_thread(self, func: Callable[[*Args], T], *args: *Args) -> T:
        return await anyio.to_thread.run_sync(func, *args, limiter=self._limiter)

    def _staging_dir(self) -> Path:
        self._dir.mkdir(parents=True, exist_ok=True)
        return self._dir / f".incoming-{uuid.uuid4().hex}"


async def _receive(
    chunks: AsyncIterator[bytes],
    target: Path,
    max_bytes: int,
    limiter: anyio.CapacityLimiter | None,
) -> None:
    size = 0
    with target.open("wb") as file:
        async for chunk in chunks:
            size += len(chunk)
            if size > max_bytes:
                raise BodyTooLarge(max_bytes, "the upload")
            await anyio.to_thread.run_sync(file.write, chunk, limiter=limiter)


def _preview(names: tuple[str, ...], shown: int = 10) -> str:
    """The first class names, each cut short: what a client brings may be megabytes of them."""
    listed = ", ".join(repr(name[:40]) for name in names[:shown])
    return f"[{listed}{', ...' if len(names) > shown else ''}] ({len(names)})"
