"""Variants as the registry records them, for the tests of variants on the server and on nodes."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from yolo_orch.domain.variants import (
    ExportFormat,
    Lineage,
    Variant,
)


def variant(export_format: ExportFormat, name: str | None = None, **lineage: object) -> Variant:
    built = Lineage(
        source_sha256="a" * 64,
        imgsz=320,
        half=False,
        int8=False,
        dynamic=False,
        batch=1,
        device="cpu",
        ultralytics_version="8.4.190",
    )
    return Variant(
        id=name or str(export_format),
        model_id="m",
        format=export_format,
        sha256="b" * 64,
        size_bytes=1,
        files={},
        lineage=replace(built, **lineage),  # type: ignore[arg-type]
        source="export:j",
        job_id="j",
        created_at=datetime(2026, 12, 1, tzinfo=UTC),
    )
