"""The weights registry: weights enter only through an import that fingerprints them (SHA-256)
and reads their metadata without running code from them.

Files live in `{data_dir}/models/{sha256}.pt`: one file per fingerprint, so importing the same
bytes twice returns the model that already has them. Since two imports (or an import and a
delete) of the same bytes touch the same file, every change to the files and the registrations
they back runs under one lock: a failed import or a delete never removes a file that a model
registered meanwhile relies on.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import BinaryIO

import anyio
import anyio.to_thread

from yolo_orch.domain import Model, NewModel, model_name_from_file
from yolo_orch.domain.aliases import parse_alias_ref
from yolo_orch.domain.variants import UNIMPORTABLE_SUFFIXES, ExportFormat, Variant
from yolo_orch.errors import (
    BodyTooLarge,
    ErrorCode,
    InvalidJob,
    InvalidWeights,
    ModelHasAliases,
    ModelNotFound,
    ModelUnusable,
    no_model_roots,
)
from yolo_orch.files.class_names import DEFAULT_CLASS_NAME_LIMITS, ClassNameLimits
from yolo_orch.files.inputs import check_relative
from yolo_orch.files.paths import client_path_errors, contained
from yolo_orch.files.shown_paths import ShownPaths
from yolo_orch.ops.clock import utcnow
from yolo_orch.registry.aliases import AliasRegistry
from yolo_orch.registry.import_slots import ImportSlots
from yolo_orch.registry.resolutions import Resolutions
from yolo_orch.registry.variant_imports import importable_format
from yolo_orch.registry.variant_store import CheckImport, VariantRegistry
from yolo_orch.registry.weights import CheckpointInfo, ResolvedWeights
from yolo_orch.store.aliases import AliasStore
from yolo_orch.store.base import ModelStore
from yolo_orch.store.memory_aliases import InMemoryAliasStore

CHUNK_BYTES = 1 << 20

Inspect = Callable[[Path], CheckpointInfo]


class ModelRegistry:
    def __init__(
        self,
        store: ModelStore,
        models_dir: Path,
        model_roots: Sequence[Path],
        inspect: Inspect,
        class_name_limits: ClassNameLimits = DEFAULT_CLASS_NAME_LIMITS,
        *,
        check_variant: CheckImport,
        file_limiter: anyio.CapacityLimiter | None = None,
        variant_retire_after_failures: int = 3,
        aliases: AliasStore | None = None,
    ) -> None:
        """`file_limiter`: the threads for the file work of requests (imports, deletes); None:
        anyio's default pool. A training job's own import (`register_file`) uses the default
        pool, so a busy API never holds up the end of a job. `check_variant`: whether an
        imported variant reproduces its model (the app's runs both on the CPU:
        `runners.variant_check.check_on_cpu`).
        `variant_retire_after_failures`: the setting (`VariantRegistry.record_runs`).
        `aliases`: where the aliases (`name@alias`) are kept, on the database of `store`; None:
        in memory, beside an in-memory `store`."""
        self._store = store
        self._dir = models_dir
        self._roots = [Path(os.path.realpath(root)) for root in model_roots]
        self._inspect = inspect
        self._class_name_limits = class_name_limits
        self._limiter = file_limiter
        self._files_lock = asyncio.Lock()
        """Held while a model file is put in place or removed together with its registration."""
        self.resolutions = Resolutions()
        self.imports = ImportSlots()
        """Held by each import of a model or a variant (the API's routes take one)."""
        self.variants = VariantRegistry(
            store,
            models_dir / "variants",
            self._files_lock,
            self.resolutions,
            weights_of=self._weights_of,
            check=check_variant,
            limiter=file_limiter,
            retire_after_failures=variant_retire_after_failures,
        )
        self.aliases = AliasRegistry(
            aliases or InMemoryAliasStore(store), store, self.resolutions, self.get
        )

    async def import_stream(
        self, chunks: AsyncIterator[bytes], *, name: str, source: str, max_bytes: int
    ) -> tuple[Model, bool]:
        """Import uploaded bytes; returns the model and whether it is new."""
        staged = self._staging_path()
        digest = hashlib.sha256()
        size = 0
        try:
            with staged.open("wb") as file:
                async for chunk in chunks:
                    size += len(chunk)
                    if size > max_bytes:
                        raise BodyTooLarge(max_bytes, "the upload")
                    digest.update(chunk)
                    await anyio.to_thread.run_sync(file.write, chunk, limiter=self._limiter)
                await anyio.to_thread.run_sync(_flush_and_sync, file, limiter=self._limiter)
            return await self._register(
                staged, digest.hexdigest(), size, name, source, self._limiter
            )
        finally:
            staged.unlink(missing_ok=True)

    async def import_path(self, relative: str, *, name: str | None) -> tuple[Model, bool]:
        """Import a file under one of the `model_roots`, named relative to that root."""
        check_relative(relative)
        refuse_exported_file(relative)
        source = await anyio.to_thread.run_sync(
            self._find_in_roots, relative, limiter=self._limiter
        )
        staged = self._staging_path()
        try:
            sha256, size = await anyio.to_thread.run_sync(
                _copy_hashing, source, staged, limiter=self._limiter
            )
            name = name or model_name_from_file(relative)
            return await self._register(staged, sha256, size, name, f"path:{source}", self._limiter)
        finally:
            staged.unlink(missing_ok=True)

    async def register_file(self, path: Path, name: str, source: str) -> Model:
        """Register a file the server produced itself (a training job's best.pt)."""
        staged = self._staging_path()
        try:
            sha256, size = await anyio.to_thread.run_sync(_copy_hashing, path, staged)
            model, _ = await self._register(staged, sha256, size, name, source, None)
            return model
        finally:
            staged.unlink(missing_ok=True)

    async def get(self, ref: str) -> Model:
        known = self.resolutions.model(ref)
        if known is not None:
            return known
        generation = self.resolutions.generation
        model = await self._lookup(ref)
        self.resolutions.keep_model(ref, model, generation)
        return model

    async def _lookup(self, ref: str) -> Model:
        """The model `ref` names (`name@alias`: the one the alias points to now); not found,
        the refusal suggests the registry's close names."""
        alias = parse_alias_ref(ref)
        if alias is not None:
            return await self.aliases.current(alias.name, alias.alias)
        try:
            return await self._store.get(ref)
        except ModelNotFound:
            names = [model.name for model in await self._store.list_models()]
            raise ModelNotFound(ref, names) from None

    async def list_models(self) -> list[Model]:
        return await self._store.list_models()

    async def delete(self, ref: str, *, cascade: bool = False) -> Model:
        """With `cascade`, its variants go too; without, a model that has any stays (409)."""
        async with self._files_lock:
            found = await self._lookup(ref)
            # The SQLite store checks again in its delete's transaction; the memory one cannot.
            if aliases := await self.aliases.pointing_to(found.id):
                raise ModelHasAliases(ref, [str(alias.ref) for alias in aliases])
            variants = await self._store.list_variants(found.id)
            model = await self._store.delete(ref, cascade=cascade)
            self.resolutions.forget()
            await self.variants.remove_folders(variants)
            if not await self._has_sha256(model.sha256):
                await anyio.to_thread.run_sync(
                    self.path_of(model).unlink, True, limiter=self._limiter
                )
        return model

    async def import_variant_path(
        self, ref: str, relative: str, max_bytes: int
    ) -> tuple[Variant, bool]:
        """An exported file or OpenVINO folder under one of the `model_roots`, as a variant of
        the model `ref`: at most `max_bytes`, as an upload."""
        check_relative(relative)
        model = await self._lookup(ref)
        source = await anyio.to_thread.run_sync(
            self._find_in_roots, relative, True, limiter=self._limiter
        )
        # A folder is an OpenVINO model, whatever its name; a file says what it is by its suffix.
        export_format = ExportFormat.OPENVINO if source.is_dir() else importable_format(source.name)
        if export_format is ExportFormat.OPENVINO and not source.is_dir():
            raise InvalidJob(
                f"{relative!r} is not an OpenVINO model folder", code=ErrorCode.INVALID_VARIANT
            )
        return await self.variants.import_path(model, source, export_format, max_bytes)

    async def resolve(self, ref: str) -> ResolvedWeights:
        """What a runner loads: the file and the fingerprint it must still have."""
        model = await self.get(ref)
        if not model.usable:
            raise ModelUnusable(ref)
        return self._weights_of(model)

    def known_weights(self, ref: str) -> ResolvedWeights | None:
        """What `resolve` would answer, from the kept answers, from any thread; None when it
        must ask the store (not kept, or it would raise)."""
        model = self.resolutions.model(ref)
        if model is None or not model.usable:
            return None
        return self._weights_of(model)

    def _weights_of(self, model: Model) -> ResolvedWeights:
        return ResolvedWeights(path=self.path_of(model), sha256=model.sha256, task=model.task)

    async def mark_unusable(self, model_id: str) -> None:
        await self._store.mark_unusable(model_id)
        self.resolutions.forget()

    def path_of(self, model: Model) -> Path:
        return self._dir / model.file_name

    async def _register(
        self,
        staged: Path,
        sha256: str,
        size: int,
        name: str,
        source: str,
        limiter: anyio.CapacityLimiter | None,
    ) -> tuple[Model, bool]:
        # Safe load: a pickle payload is refused here, and no code in the file ever runs.
        try:
            info = await anyio.to_thread.run_sync(self._inspect, staged, limiter=limiter)
        except InvalidWeights as exc:  # say it in the client's terms, not the server's paths
            reason = ShownPaths(named={staged: name}).text(exc.reason)
            raise InvalidWeights(Path(name), reason.replace(staged.name, name)) from None
        self._class_name_limits.check(info.class_names, name)
        file_name = f"{sha256}.pt"
        new = NewModel(
            name=name,
            sha256=sha256,
            size_bytes=size,
            task=info.task,
            class_names=info.class_names,
            source=source,
            file_name=file_name,
        )
        async with self._files_lock:
            await anyio.to_thread.run_sync(
                os.replace, staged, self._dir / file_name, limiter=limiter
            )
            try:
                added = await self._store.add(new, utcnow())
                self.resolutions.forget()
                return added
            except Exception:
                # A refused add registered nothing. Remove the file only if no model has these
                # bytes: one that does (registered before, the add failing for another reason)
                # still needs it.
                if not await self._has_sha256(sha256):
                    await anyio.to_thread.run_sync(
                        (self._dir / file_name).unlink, True, limiter=limiter
                    )
                raise

    async def _has_sha256(self, sha256: str) -> bool:
        return any(model.sha256 == sha256 for model in await self._store.list_models())

    def _staging_path(self) -> Path:
        # ".pt": ultralytics decides how to load a file by its suffix.
        self._dir.mkdir(parents=True, exist_ok=True)
        return self._dir / f".incoming-{uuid.uuid4().hex}.pt"

    def _find_in_roots(self, relative: str, folders: bool = False) -> Path:
        if not self._roots:
            raise no_model_roots()
        for root in self._roots:
            with client_path_errors(relative):
                real = contained(root / relative, root, relative, "model roots")
                try:
                    mode = os.stat(real).st_mode
                except FileNotFoundError:
                    continue
                if stat.S_ISREG(mode) or (folders and stat.S_ISDIR(mode)):
                    return Path(real)
        raise InvalidJob(
            f"{relative!r} is not a file under the model roots", code=ErrorCode.FILE_NOT_FOUND
        )


def refuse_exported_file(file_name: str) -> None:
    """An exported model is imported as a variant of its `.pt` (or not at all), never as one."""
    lowered = file_name.lower().rstrip("/")
    if not lowered.endswith((*UNIMPORTABLE_SUFFIXES, ".onnx", "_openvino_model")):
        return  # not an export: the checkpoint inspection decides
    export_format = importable_format(lowered)  # refuses TorchScript and TensorRT outright
    raise InvalidJob(
        f"{file_name!r} is an {export_format} model: import it as a variant of the .pt it was "
        "exported from (POST /v1/models/{ref}/variants)",
        code=ErrorCode.IMPORT_AS_VARIANT,
    )


def _copy_hashing(source: Path, target: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with source.open("rb") as reader, target.open("wb") as writer:
        while chunk := reader.read(CHUNK_BYTES):
            digest.update(chunk)
            writer.write(chunk)
            size += len(chunk)
        _flush_and_sync(writer)
    return digest.hexdigest(), size


def _flush_and_sync(file: BinaryIO) -> None:
    file.flush()
    os.fsync(file.fileno())
