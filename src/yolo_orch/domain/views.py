"""Models and variants as clients see them: plain JSON values (the API's models validate them;
a training job's result and a Ray node's registration carry them)."""

from __future__ import annotations

import dataclasses

from yolo_orch.domain import JsonObject, Model
from yolo_orch.domain.variants import Variant


def model_view(model: Model) -> JsonObject:
    """A model as clients see it (the API's ModelPublic, and training results)."""
    view = dataclasses.asdict(model)
    view.pop("file_name")
    view["class_names"] = list(model.class_names)
    view["created_at"] = model.created_at.isoformat()
    return view


def variant_view(variant: Variant) -> JsonObject:
    """A variant as clients see it."""
    return {
        "id": variant.id,
        "model_id": variant.model_id,
        "format": str(variant.format),
        "sha256": variant.sha256,
        "size_bytes": variant.size_bytes,
        "files": dict(variant.files),
        "lineage": {
            key: value for key, value in vars(variant.lineage).items() if value is not None
        },
        "source": variant.source,
        "created_at": variant.created_at.isoformat(),
        "usable": variant.usable,
        "unusable_reason": variant.unusable_reason,
    }
