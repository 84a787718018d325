"""A node's own store of model weights: files named by sha256 (`<sha256>.pt`, as ultralytics
loads only `.pt` names) and exported variants' folders named by their manifest digest
(`<digest>.variant/`, laid out as in the registry), the least recently used dropped beyond
`capacity` entries (a variant, however many files, is one). Runs on the node; what it lacks comes
from the server through Ray's object store and is verified before it is kept."""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yolo_orch.domain.variants import Variant
from yolo_orch.errors import ModelNotFound, ModelTampered, VariantTampered
from yolo_orch.registry.manifests import manifest_digest, remove_tree, verify_tree
from yolo_orch.registry.resolutions import ResolvedVariant
from yolo_orch.registry.weights import ResolvedWeights, sha256_file

log = logging.getLogger(__name__)

_SUFFIX = ".pt"
_VARIANT_SUFFIX = ".variant"


@dataclass(frozen=True)
class WeightsOffer:
    """A job's model as the server has it. `parcel` holds one Ray object ref to the file's
    bytes; inside a list, so that Ray passes the ref and moves the bytes only if the node
    asks for them."""

    model_id: str
    sha256: str
    name: str
    task: str
    parcel: list[Any] = field(compare=False)


@dataclass(frozen=True)
class VariantOffer:
    """The exported variant of the job's model the server picked for the job's lane
    (`parcels.pick_variant`). `parcel` holds one Ray object ref to its files' bytes, by their
    paths in the variant's manifest (`variant.files`), in a list as for `WeightsOffer`."""

    variant: Variant
    parcel: list[Any] = field(compare=False)


class NodeModelCache:
    def __init__(self, folder: Path, capacity: int, fetch: Callable[[Any], Any]) -> None:
        """`fetch`: what is behind a parcel's ref (`ray.get`): a model file's bytes, or a
        variant's files by their paths."""
        self._folder = folder
        self._capacity = capacity
        self._fetch = fetch
        self._ensured: dict[str, WeightsOffer] = {}
        """By model id: the offers `ensure` verified in this process."""
        self._variants_lock = threading.Lock()
        self._variants_used: Counter[str] = Counter()
        """By digest: how many of this process's running jobs use each variant entry."""
        self._variant_offers: dict[str, VariantOffer] = {}
        """By digest: the variants of the jobs running here."""

    def held(self) -> list[str]:
        """The sha256s of the model files and the digests of the variants kept here, most
        recently used first."""
        return [path.stem for path in self._entries()]

    def _entries(self) -> list[Path]:
        if not self._folder.is_dir():
            return []
        entries = [
            path
            for path in self._folder.iterdir()
            if path.suffix in (_SUFFIX, _VARIANT_SUFFIX) and _is_digest(path.stem)
        ]
        entries.sort(key=lambda path: path.stat().st_mtime_ns, reverse=True)
        return entries

    def ensure(self, offer: WeightsOffer) -> Path:
        """The local file of the offered model: the kept copy when its fingerprint still
        matches, else the server's, fetched and verified. Raise `ModelTampered` when what
        arrived does not have the fingerprint the registry recorded."""
        # A lane actor's jobs share this cache: the entry a running job resolves stays until
        # this offer is verified (or refused), so only a refusal takes it away.
        path = self._path(offer.sha256)
        if path.is_file():
            if sha256_file(path) == offer.sha256:
                os.utime(path)  # most recently used
                self._ensured[offer.model_id] = offer
                return path
            log.warning("the kept copy of %s here changed; fetching it again", offer.name)
            path.unlink()
        data: bytes = self._fetch(offer.parcel[0])
        actual = hashlib.sha256(data).hexdigest()
        if actual != offer.sha256:
            self._ensured.pop(offer.model_id, None)
            raise ModelTampered(Path(offer.name), offer.sha256, actual)
        self._folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        partial.write_bytes(data)
        partial.replace(path)
        self._ensured[offer.model_id] = offer
        self._evict()
        return path

    def resolve(self, model_id: str) -> ResolvedWeights:
        """What a runner on this node loads for `model_id`: the kept copy `ensure` verified
        for the job (the runner checks its fingerprint again when it opens it)."""
        offer = self._ensured.get(model_id)
        if offer is None:
            raise ModelNotFound(model_id)
        return ResolvedWeights(self._path(offer.sha256), offer.sha256, offer.task)

    @contextmanager
    def using_variant(self, offer: VariantOffer) -> Iterator[ResolvedVariant]:
        """The offered variant's folder here, for the length of one job: the kept copy when
        every file still matches the manifest, else the server's files, fetched and verified
        (`VariantTampered`, a `model_tampered`, when they do not match what the registry
        recorded). While the job runs, `variants_of` lists it and eviction leaves it."""
        digest = offer.variant.sha256
        with self._variants_lock:
            self._variants_used[digest] += 1
            self._variant_offers[digest] = offer
        try:
            yield self._ensure_variant(offer)
        finally:
            with self._variants_lock:
                self._variants_used[digest] -= 1
                if self._variants_used[digest] <= 0:
                    del self._variants_used[digest]
                    del self._variant_offers[digest]

    def variants_of(self, model_id: str) -> list[ResolvedVariant]:
        """The variants of `model_id` that jobs running here use, newest first: what the
        runner on this node picks from, by the same rule the server picked with."""
        with self._variants_lock:
            offers = [o for o in self._variant_offers.values() if o.variant.model_id == model_id]
        offers.sort(key=lambda offer: offer.variant.created_at, reverse=True)
        return [ResolvedVariant(o.variant, self._variant_path(o.variant.sha256)) for o in offers]

    def _ensure_variant(self, offer: VariantOffer) -> ResolvedVariant:
        variant = offer.variant
        folder = self._variant_path(variant.sha256)
        if folder.is_dir():
            try:
                verify_tree(folder, variant.files, variant.sha256)
            except ModelTampered:
                log.warning("the kept copy of variant %s changed; fetching it again", variant.id)
                remove_tree(folder)
            else:
                os.utime(folder)  # most recently used
                return ResolvedVariant(variant, folder)
        files: dict[str, bytes] = self._fetch(offer.parcel[0])
        _check_variant_files(variant, files)
        self._folder.mkdir(parents=True, exist_ok=True)
        partial = folder.with_name(f".{folder.name}.{os.getpid()}.{threading.get_ident()}.partial")
        remove_tree(partial)
        for name, data in files.items():
            (partial / name).parent.mkdir(parents=True, exist_ok=True)
            (partial / name).write_bytes(data)
        try:
            partial.replace(folder)
        except OSError:  # another worker of this node kept the same variant meanwhile
            remove_tree(partial)
            verify_tree(folder, variant.files, variant.sha256)
        self._evict()
        return ResolvedVariant(variant, folder)

    def _path(self, sha256: str) -> Path:
        return self._folder / f"{sha256}{_SUFFIX}"

    def _variant_path(self, digest: str) -> Path:
        return self._folder / f"{digest}{_VARIANT_SUFFIX}"

    def _evict(self) -> None:
        with self._variants_lock:
            in_use = set(self._variants_used)
        kept = 0
        for entry in self._entries():
            if entry.stem in in_use or kept < self._capacity:
                kept += 1
            elif entry.suffix == _VARIANT_SUFFIX:
                remove_tree(entry)
            else:
                entry.unlink(missing_ok=True)


def _check_variant_files(variant: Variant, files: dict[str, bytes]) -> None:
    """Raise `VariantTampered` unless `files` are exactly the variant's manifest, each with its
    SHA-256, and the manifest is the one its digest was computed over."""

    def tampered(name: str, expected: str, actual: str) -> VariantTampered:
        return VariantTampered(variant.id, ModelTampered(Path(name), expected, actual))

    if manifest_digest(variant.files) != variant.sha256:
        raise tampered("manifest", variant.sha256, manifest_digest(variant.files))
    for name in sorted(variant.files):
        if Path(name).is_absolute() or ".." in Path(name).parts:
            raise tampered(name, "a path inside the variant's folder", name)
    for name in sorted(set(files) - set(variant.files)):
        raise tampered(name, "no such file", "a file that was added")
    for name, expected in sorted(variant.files.items()):
        data = files.get(name)
        actual = "missing" if data is None else hashlib.sha256(data).hexdigest()
        if actual != expected:
            raise tampered(name, expected, actual)


def _is_digest(name: str) -> bool:
    return len(name) == 64 and all(c in "0123456789abcdef" for c in name)
