"""How many imports of models and variants run at once.

An import holds its upload (or copy) on disk and its work in a request file thread, and a
variant's import runs the variant and its model's `.pt` side by side (`variant_check`): three
400 MB ONNX uploads at once took 2.1 GB more memory. Beyond `max_concurrent_imports` an import
is refused before any of its body is read (429 `imports_busy`), not queued behind the others.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from yolo_orch.errors import ImportsBusy

RETRY_AFTER_S = 5
"""What a refused import is told to wait: an import of a small model or variant takes about a
second, a large one some seconds (it is hashed and, as a variant, run once)."""


class ImportSlots:
    """Counted on the event loop, where every import begins: no lock."""

    def __init__(self) -> None:
        self.active = 0

    @contextlib.asynccontextmanager
    async def slot(self, limit: int) -> AsyncIterator[None]:
        """Hold one of `limit` slots for an import, or raise `ImportsBusy`."""
        if self.active >= limit:
            raise ImportsBusy(limit, RETRY_AFTER_S)
        self.active += 1
        try:
            yield
        finally:
            self.active -= 1
