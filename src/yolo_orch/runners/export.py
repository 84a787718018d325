"""Export jobs: a registry `.pt` model exported with ultralytics on the job's lane, registered as
a variant of that model. Training jobs that ask for `params.export` use the same steps.

Stages, each reported as progress and each a cancel point: `load` (check the packages, verify the
`.pt` fingerprint, load it), `export` (ultralytics' exporter, its log lines in the job's log),
`check` (the export and the `.pt` run on a fixed probe on the job's lane and their raw outputs
must agree within the variant's tolerance, `variant_check`; else the job fails
`variant_mismatch` and nothing is registered), `fingerprint` (a SHA-256 per file of what it
wrote) and `register` (the registry copies and re-hashes the files into a staged folder, renames
it into place, then records it). The exporter
writes into the job's folder, never next to the registry's weights; a rerun after a crash starts
the export afresh, and a job registers each format once.

Call `configure_ultralytics` before constructing the runner (offline, safe load, no installs).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from yolo_orch.domain import JobResult, JsonObject, Progress
from yolo_orch.domain.specs import DatasetSpec
from yolo_orch.domain.variants import ENTRY_NAMES, ExportFormat, Lineage
from yolo_orch.errors import InvalidJob, InvalidJobInput, JobCancelled, PathOutsideRoots
from yolo_orch.files.datasets import load_dataset
from yolo_orch.files.jobfiles import write_atomic
from yolo_orch.ops.logs import ultralytics_info_to_job_logs, warnings_to_job_logs
from yolo_orch.params.export import ExportParams
from yolo_orch.registry.manifests import Manifest, fingerprint_entry
from yolo_orch.registry.weights import ModelTampered, ResolvedWeights, sha256_file
from yolo_orch.runners.base import RunContext, Runner
from yolo_orch.runners.formats import export_packages, lane_runtime, require_packages
from yolo_orch.runners.variant_check import check_reproduces

__all__ = ["ExportedFiles", "ExportsAfterTraining", "YoloExportRunner"]

log = logging.getLogger(__name__)

STAGES = ("load", "export", "check", "fingerprint", "register")
EXPORT_DIR = "export"
_EXPORTER_NAMES = {(ExportFormat.OPENVINO, True): "model_int8_openvino_model"}
"""Where ultralytics' exporter names its output otherwise than `ENTRY_NAMES` (format, int8)."""


@dataclass(frozen=True)
class ExportedFiles:
    """What an export wrote, for the registry to register as a variant of `model_id`."""

    output: Path
    """The file, or OpenVINO's folder, named as `variants.ENTRY_NAMES` says."""
    manifest: Manifest
    model_id: str
    format: ExportFormat
    lineage: Lineage
    job_id: str
    source: str


ResolveWeights = Callable[[str], ResolvedWeights]
RegisterVariant = Callable[[ExportedFiles], JsonObject]
"""Registers the files; returns the variant's public view."""


class YoloExportRunner:
    def __init__(
        self,
        resolve_weights: ResolveWeights,
        register_variant: RegisterVariant,
        *,
        data_roots: Sequence[Path],
    ) -> None:
        self._resolve_weights = resolve_weights
        self._register_variant = register_variant
        self._data_roots = tuple(data_roots)

    def run(self, ctx: RunContext) -> JobResult:
        params = ExportParams.from_job(ctx.job.params)
        if ctx.job.model_id is None:
            raise InvalidJobInput(f"{ctx.job.model!r} is not a registry model to export")
        view = self.export(ctx, ctx.job.model_id, params, source=f"export:{ctx.job.id}")
        summary = {"model_id": ctx.job.model_id, "variant_id": view["id"], "format": view["format"]}
        return JobResult(summary=summary, detail={**summary, "variant": view})

    def export(
        self,
        ctx: RunContext,
        model_id: str,
        params: ExportParams,
        *,
        source: str,
        stage_offset: int = 0,
        stage_total: int = len(STAGES),
    ) -> JsonObject:
        """Export the registry model `model_id` on the job's lane and register the variant."""
        stages = _Stages(ctx, params.format, stage_offset, stage_total)
        stages.begin("load")
        require_packages(export_packages(params), f"exporting to {params.format}")
        device = ctx.devices[0]
        weights = self._resolve_weights(model_id)
        model = _load(weights)
        stages.begin("export")
        output = self._export(ctx, model, params, device)
        stages.begin("check")
        difference = check_reproduces(
            model.model,
            output,
            params.format,
            imgsz=params.imgsz,
            dynamic=params.dynamic,
            half=params.half,
            int8=params.int8,
            device=device,
        )
        log.info("the %s export reproduces the .pt within %.3g", params.format, difference)
        stages.begin("fingerprint")
        manifest = fingerprint_entry(output)
        files = ExportedFiles(
            output=output,
            manifest=manifest,
            model_id=model_id,
            format=params.format,
            lineage=_lineage(weights.sha256, params, device),
            job_id=ctx.job.id,
            source=source,
        )
        stages.begin("register")
        view = self._register_variant(files)
        stages.end()
        shutil.rmtree(output.parent, ignore_errors=True)
        return view

    def _export(self, ctx: RunContext, model: Any, params: ExportParams, device: str) -> Path:
        folder = ctx.workdir / EXPORT_DIR
        shutil.rmtree(folder, ignore_errors=True)  # what a crashed attempt left
        folder.mkdir(parents=True)
        # The exporter names its output after the model's file: keep it in the job's folder.
        model.model.pt_path = str(folder / "model.pt")
        args: dict[str, Any] = {
            "format": str(params.format),
            "imgsz": params.imgsz,
            "dynamic": params.dynamic,
            "batch": params.batch,
            "device": _ultralytics_device(device),
        }
        if params.half or params.int8:
            args["quantize"] = 16 if params.half else 8
        if params.simplify is not None:
            args["simplify"] = params.simplify
        if params.int8:
            args["data"] = str(self._calibration_yaml(ctx))
        produced = Path(_exporting(model, args))
        written = folder / _EXPORTER_NAMES.get(
            (params.format, params.int8), ENTRY_NAMES[params.format]
        )
        if produced.resolve() != written.resolve() or not produced.exists():
            raise RuntimeError(f"the exporter wrote {produced}, not {written}")
        expected = folder / ENTRY_NAMES[params.format]
        if written != expected:
            written.rename(expected)
        return expected

    def _calibration_yaml(self, ctx: RunContext) -> Path:
        """The checked dataset, checked again (it may have changed since submission)."""
        raw = ctx.job.spec_as(DatasetSpec).dataset_path
        if raw is None:
            raise InvalidJobInput("int8 needs spec.dataset_path, a checked data.yaml")
        try:
            dataset = load_dataset(Path(raw), self._data_roots)
        except (InvalidJob, PathOutsideRoots) as e:
            raise InvalidJobInput(e.message) from e
        target = ctx.workdir / "calibration.yaml"
        write_atomic(target, yaml.safe_dump(dataset.for_ultralytics(), sort_keys=False).encode())
        return target


class ExportsAfterTraining:
    """A training runner whose produced model is exported to `params.export` in the same job.

    The trained model is registered first; each format then takes the export stages, and a
    cancel between them ends the job cancelled with the model (and the variants made so far)
    kept."""

    def __init__(self, training: Runner, exporter: YoloExportRunner) -> None:
        self._training = training
        self._exporter = exporter

    def run(self, ctx: RunContext) -> JobResult:
        result = self._training.run(ctx)
        formats = [ExportFormat(name) for name in ctx.job.params.get("export", [])]
        model_id = result.summary.get("model_id")
        if not formats or not isinstance(model_id, str):
            return result
        imgsz = int(ctx.job.params.get("imgsz", 640))
        total = len(STAGES) * len(formats)
        views = [
            self._exporter.export(
                ctx,
                model_id,
                ExportParams(format=export_format, imgsz=imgsz),
                source=f"training:{ctx.job.id}",
                stage_offset=index * len(STAGES),
                stage_total=total,
            )
            for index, export_format in enumerate(formats)
        ]
        ids = [view["id"] for view in views]
        return JobResult(
            summary={**result.summary, "variant_ids": ids},
            detail={**result.detail, "variants": views},
        )


class _Stages:
    def __init__(self, ctx: RunContext, export_format: ExportFormat, offset: int, total: int):
        self._ctx = ctx
        self._format = export_format
        self._offset = offset
        self._total = total
        self._done = offset

    def begin(self, stage: str) -> None:
        if self._ctx.should_cancel():
            raise JobCancelled()
        self._ctx.report_progress(
            Progress(
                self._done,
                self._total,
                "stages",
                detail={"stage": stage, "format": str(self._format)},
            )
        )
        self._done += 1

    def end(self) -> None:
        self._ctx.report_progress(
            Progress(self._done, self._total, "stages", detail={"format": str(self._format)})
        )


def _load(weights: ResolvedWeights) -> Any:
    from ultralytics.models import YOLO

    path = weights.path
    if not path.is_file():  # ultralytics would go looking for a missing .pt online
        raise FileNotFoundError(f"weights file {path} is missing")
    actual = sha256_file(path)
    if actual != weights.sha256:
        raise ModelTampered(path, weights.sha256, actual)
    return YOLO(str(path))


def _exporting(model: Any, args: dict[str, Any]) -> str:
    """Run ultralytics' exporter with its progress and its warnings in the job's log: the
    exporters call what torch has deprecated, which must not fail a job even where warnings are
    errors."""
    with ultralytics_info_to_job_logs(), warnings_to_job_logs():
        return str(model.export(**args))


def _lineage(source_sha256: str, params: ExportParams, device: str) -> Lineage:
    built_on = lane_runtime(device)
    return Lineage(
        source_sha256=source_sha256,
        imgsz=params.imgsz,
        half=params.half,
        int8=params.int8,
        dynamic=params.dynamic,
        batch=params.batch,
        device=device,
        gpu_name=built_on.gpu_name,
        compute_capability=built_on.compute_capability,
        tensorrt_version=built_on.tensorrt_version
        if params.format is ExportFormat.ENGINE
        else None,
        ultralytics_version=built_on.ultralytics_version,
    )


def _ultralytics_device(lane: str) -> str:
    if lane == "cpu":
        return "cpu"
    prefix, _, index = lane.partition(":")
    if prefix != "cuda" or not index.isdigit():
        raise InvalidJobInput(f"cannot export on lane {lane!r}")
    return index
