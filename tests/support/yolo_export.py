"""Export run contexts and a registry stand-in, for the tests of the export runner and of
variants."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from yolo_orch.domain import JobKind
from yolo_orch.registry.weights import ResolvedWeights
from yolo_orch.runners.export import ExportedFiles
from yolo_orch.testing.yolo import RecordingContext


class Registry:
    def __init__(self, weights: ResolvedWeights) -> None:
        self.weights = weights
        self.resolved: list[str] = []
        self.registered: list[ExportedFiles] = []

    def resolve(self, ref: str) -> ResolvedWeights:
        self.resolved.append(ref)
        return self.weights

    def register(self, files: ExportedFiles) -> dict[str, Any]:
        self.registered.append(files)
        return {"id": "variant-1", "format": str(files.format)}


def export_context(recorder: RecordingContext, workdir: Path, **params: Any) -> Any:
    ctx = recorder.context(workdir, [], imgsz=64, **params)
    return replace(ctx, job=replace(ctx.job, kind=JobKind.EXPORT, model_id="tiny-id"))
