"""The real runtime: ultralytics on this host's GPUs (or its CPU), weights from the registry (or,
on a Ray node, from the node's verified cache: `ModelAccess`)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import anyio.from_thread

from yolo_orch.domain import JobKind, JobResult, JsonObject
from yolo_orch.domain.views import model_view, variant_view
from yolo_orch.errors import ErrorCode, InvalidJobInput, VariantTampered
from yolo_orch.params.slicing import DEFAULT_MAX_SLICES_PER_IMAGE
from yolo_orch.registry.models import ModelRegistry
from yolo_orch.registry.resolutions import ResolvedVariant
from yolo_orch.registry.weights import ModelTampered, ResolvedWeights
from yolo_orch.runners import variant_runs
from yolo_orch.runners.base import BatchOutcome, BatchRunner, RunContext, Runner, run_each
from yolo_orch.runners.dataset_capture import CaptureWriter
from yolo_orch.runners.decode import decode_image
from yolo_orch.runners.decode_ahead import DecodeAhead
from yolo_orch.runners.decode_ahead import default_threads as default_decode_threads
from yolo_orch.runners.export import ExportedFiles, ExportsAfterTraining, YoloExportRunner
from yolo_orch.runners.failures import failure_of
from yolo_orch.runners.inference import YoloInferenceRunner
from yolo_orch.runners.sources import shipped_architecture
from yolo_orch.runners.stream import StreamOutputs, StreamRunner
from yolo_orch.runners.stream_hub import StreamHubs
from yolo_orch.runners.stream_models import yolo_stream_models
from yolo_orch.runners.training import YoloTrainingRunner
from yolo_orch.runners.validation import YoloValidationRunner
from yolo_orch.runners.yolo_env import configure_ultralytics

if TYPE_CHECKING:
    from yolo_orch.runners.decode_ahead import Pixels


def detect_lanes() -> list[str]:
    """`cuda:0..N-1` when CUDA is available, else one `cpu` lane."""
    import torch

    if torch.cuda.is_available():
        return [f"cuda:{index}" for index in range(torch.cuda.device_count())]
    return ["cpu"]


class ModelAccess(Protocol):
    """Where the runners' models come from and where what they make goes: the registry on the
    server (`RegistryAccess`); a node's verified cache on a Ray node. Called from the runners'
    worker threads."""

    def resolve(self, ref: str) -> ResolvedWeights: ...

    def resolve_variants(self, model_id: str) -> list[ResolvedVariant]:
        """The model's usable variants, newest first."""
        ...

    def register_model(self, path: Path, name: str, job_id: str) -> JsonObject:
        """A training job's best.pt, registered under `name`; the model's public view."""
        ...

    def register_variant(self, files: ExportedFiles) -> JsonObject: ...

    def watched(self, runner: Runner) -> Runner:
        """`runner`, with whatever a model found tampered while it runs means here."""
        ...


class UltralyticsRuntime:
    name = "ultralytics"

    def __init__(
        self,
        models: ModelAccess,
        config_dir: Path,
        *,
        model_cache_size: int,
        data_roots: Sequence[Path],
        cpu_threads: int | None,
        max_image_pixels: int,
        max_slices_per_image: int = DEFAULT_MAX_SLICES_PER_IMAGE,
        decode_ahead_bytes: int = 0,
        streams: StreamOutputs | None = None,
        capture: CaptureWriter | None = None,
    ) -> None:
        """`decode_ahead_bytes`: memory for uploads decoded while their jobs wait
        (`decode_ahead`); 0 where this runtime's runners never see the uploads' files (a Ray
        node, or a server whose jobs run on one). `streams`: what stream jobs publish to
        (the server's; a runtime of its own else). `capture`: where the images of inference
        and stream jobs' `params.capture` are written (none on a Ray node)."""
        configure_ultralytics(config_dir)  # before anything imports ultralytics
        self._models = models
        self._ahead = DecodeAhead(
            partial(_decode_upload, max_pixels=max_image_pixels),
            decode_ahead_bytes,
            default_decode_threads(gpus=sum(lane.startswith("cuda") for lane in detect_lanes())),
        )
        streams = streams or StreamOutputs()
        hubs = StreamHubs(streams.max_batch)
        self.inference = YoloInferenceRunner(
            models.resolve,
            model_cache_size,
            cpu_threads=cpu_threads,
            max_image_pixels=max_image_pixels,
            data_roots=data_roots,
            resolve_variants=models.resolve_variants,
            max_slices_per_image=max_slices_per_image,
            decoded_ahead=self._ahead.take,
            stream_hubs=hubs,
            capture=capture,
        )
        self.training = YoloTrainingRunner(
            models.resolve, models.register_model, data_roots=data_roots, cpu_threads=cpu_threads
        )
        self.validation = YoloValidationRunner(
            models.resolve, data_roots=data_roots, cpu_threads=cpu_threads
        )
        self.export = YoloExportRunner(
            models.resolve, models.register_variant, data_roots=data_roots
        )
        self.streams = StreamRunner(
            yolo_stream_models(self.inference), streams, hubs=hubs, dataset_capture=capture
        )
        self._runners: dict[JobKind, Runner] = {
            JobKind.STREAM: self.streams,
            JobKind.INFERENCE: self.inference,
            JobKind.TRAINING: ExportsAfterTraining(self.training, self.export),
            JobKind.VALIDATION: self.validation,
            JobKind.EXPORT: self.export,
        }

    def lanes(self) -> list[str]:
        return detect_lanes()

    def runner(self, kind: JobKind) -> Runner:
        return self._models.watched(self._runners[kind])

    def provides(self, model: str, kind: JobKind) -> bool:
        """Training, and a tune's trainings, may start from a shipped architecture
        (`yolo11n.yaml`); every other model comes from the registry."""
        trains = kind in (JobKind.TRAINING, JobKind.TUNE)
        return trains and self.model_task(model) is not None

    def model_task(self, model: str) -> str | None:
        """The task of a shipped architecture's head; None for anything else."""
        if not model.endswith(".yaml"):
            return None
        try:
            return shipped_architecture(model)
        except InvalidJobInput:
            return None

    def cached_models(self, lane: str) -> list[str]:
        return self.inference.cached_models(lane)

    def cache_stats(self) -> tuple[int, int]:
        return self.inference.cache_hits, self.inference.loads

    def uploaded(self, paths: Sequence[Path]) -> None:
        self._ahead.start(paths)

    def decoded_ahead(self) -> int:
        return self._ahead.taken


def _decode_upload(path: Path, max_pixels: int) -> Pixels | str:
    """An upload as its job's lane would decode it, read from the job's own inputs folder."""
    return decode_image(path, [path.parent], max_pixels)


class RegistryAccess:
    """The runners' models on the server: the registry, which lives on the event loop."""

    def __init__(self, registry: ModelRegistry) -> None:
        self._registry = registry

    def watched(self, runner: Runner) -> Runner:
        return MarksTamperedModels(runner, self._registry)

    def register_model(self, path: Path, name: str, job_id: str) -> JsonObject:
        """A training job's best.pt enters the registry like any import: fingerprinted, and
        the same bytes again (a rerun after a crash) return the model registered before."""
        model = anyio.from_thread.run(
            self._registry.register_file, path, name, f"training:{job_id}"
        )
        return model_view(model)

    def register_variant(self, files: ExportedFiles) -> JsonObject:
        """An export's files enter the registry as a variant of the model they came from."""

        async def register() -> JsonObject:
            model = await self._registry.get(files.model_id)
            variant = await self._registry.variants.register_export(
                files.output,
                model,
                files.format,
                files.lineage,
                job_id=files.job_id,
                source=files.source,
                expected=files.manifest,
            )
            return variant_view(variant)

        return anyio.from_thread.run(register)

    def resolve(self, ref: str) -> ResolvedWeights:
        # Runners run in worker threads; the registry lives on the event loop.
        known = self._registry.known_weights(ref)
        return known if known is not None else anyio.from_thread.run(self._registry.resolve, ref)

    def resolve_variants(self, model_id: str) -> list[ResolvedVariant]:
        known = self._registry.resolutions.variants(model_id)
        if known is not None:
            return known
        return anyio.from_thread.run(self._registry.variants.resolve, model_id)


class MarksTamperedModels:
    """A model or variant whose files no longer match their fingerprints is never loaded
    again; a variant whose jobs keep failing `runtime_error` is retired
    (`VariantRegistry.record_runs`), each job's outcome told to the registry with the variant
    that ran it (`variant_runs`)."""

    def __init__(self, runner: Runner, registry: ModelRegistry) -> None:
        self._runner = runner
        self._registry = registry

    def run(self, ctx: RunContext) -> JobResult:
        variant_runs.take()  # a note left by a run that ended before it loaded anything
        try:
            result = self._runner.run(ctx)
        except (VariantTampered, ModelTampered) as e:
            variant_runs.take()
            self._retire(ctx, e)
            raise
        except Exception as e:
            self._record([e])
            raise
        self._record([result])
        return result

    def run_batch(self, ctxs: Sequence[RunContext]) -> list[BatchOutcome]:
        variant_runs.take()
        try:
            if isinstance(self._runner, BatchRunner):
                outcomes = self._runner.run_batch(ctxs)
            else:
                outcomes = run_each(self._runner, ctxs)
        except (VariantTampered, ModelTampered) as e:
            variant_runs.take()
            self._retire(ctxs[0], e)
            raise
        except Exception as e:  # the batch's: every job of it fails with it
            self._record([e] * len(ctxs))
            raise
        for ctx, outcome in zip(ctxs, outcomes, strict=True):
            if isinstance(outcome, VariantTampered | ModelTampered):
                self._retire(ctx, outcome)
        self._record(outcomes)
        return outcomes

    def _retire(self, ctx: RunContext, error: VariantTampered | ModelTampered) -> None:
        if isinstance(error, VariantTampered):  # the variant is retired; its model stays usable
            reason = f"its files no longer match their fingerprints: {error.message}"
            anyio.from_thread.run(self._registry.variants.mark_unusable, error.variant_id, reason)
        elif ctx.job.model_id is not None:
            anyio.from_thread.run(self._registry.mark_unusable, ctx.job.model_id)

    def _record(self, outcomes: Sequence[BatchOutcome]) -> None:
        """Tell the registry how the jobs that ran a variant ended: a success, a
        `runtime_error` (its message), or nothing for any other failure."""
        variant_id = variant_runs.take()
        if variant_id is None:
            return
        runs: list[str | None] = []
        for outcome in outcomes:
            if isinstance(outcome, JobResult):
                runs.append(None)
            elif (error := failure_of(outcome)).code == ErrorCode.RUNTIME_ERROR:
                runs.append(error.message)
        if runs:
            anyio.from_thread.run(self._registry.variants.record_runs, variant_id, runs)
