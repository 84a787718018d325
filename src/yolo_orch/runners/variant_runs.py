"""Which variant a run loaded, from the runner to whatever watches its outcome.

A job that fails carries no result to say which variant ran it, and a variant that fails every
job it is given must be retired (`VariantRegistry.record_runs`). The inference runner notes the
variant it picked (`note`), in its worker thread, before it loads it; the watcher around the
runner (`runners.yolo.MarksTamperedModels`), in the same thread, takes the note once the run
ended (`take`), and forgets a stale one before the next run.
"""

from __future__ import annotations

import threading

_noted = threading.local()


def note(variant_id: str | None) -> None:
    """The run in this thread picked `variant_id` (None: the `.pt`)."""
    _noted.variant_id = variant_id


def take() -> str | None:
    """The variant the last run in this thread picked, forgotten once read."""
    variant_id: str | None = getattr(_noted, "variant_id", None)
    _noted.variant_id = None
    return variant_id
