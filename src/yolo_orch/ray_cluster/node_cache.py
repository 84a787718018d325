"""A node's own store of model weights: files named by sha256 (`<sha256>.pt`, as ultralytics
loads only `.pt` names), the least recently used dropped
beyond `capacity`. Runs on the node; a file it lacks comes from the server through Ray's object
store and is verified before it is kept."""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yolo_orch.errors import ModelNotFound, ModelTampered
from yolo_orch.weights import ResolvedWeights, sha256_file

log = logging.getLogger(__name__)

_SUFFIX = ".pt"


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


class NodeModelCache:
    def __init__(self, folder: Path, capacity: int, fetch: Callable[[Any], bytes]) -> None:
        """`fetch`: the bytes behind a parcel's ref (`ray.get`)."""
        self._folder = folder
        self._capacity = capacity
        self._fetch = fetch
        self._ensured: dict[str, WeightsOffer] = {}
        """By model id: the offers `ensure` verified in this process."""

    def held(self) -> list[str]:
        """The sha256s of the files kept here, most recently used first."""
        if not self._folder.is_dir():
            return []
        files = [
            path
            for path in self._folder.iterdir()
            if path.suffix == _SUFFIX and _is_digest(path.stem)
        ]
        files.sort(key=lambda path: path.stat().st_mtime_ns, reverse=True)
        return [path.stem for path in files]

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
        data = self._fetch(offer.parcel[0])
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

    def _path(self, sha256: str) -> Path:
        return self._folder / f"{sha256}{_SUFFIX}"

    def _evict(self) -> None:
        for sha256 in self.held()[self._capacity :]:
            self._path(sha256).unlink(missing_ok=True)


def _is_digest(name: str) -> bool:
    return len(name) == 64 and all(c in "0123456789abcdef" for c in name)
