"""The GPU claims on a CUDA host: where each lane's models live, DataParallel over lane pairs,
`half` inference, CUDA OOM containment, NVML readings and the TensorRT export.

Marked `gpu` and skipped without CUDA; CI deselects them (`-m "not gpu"`). `bench.gpu_check`
runs them on a GPU host. Models are the tiny untrained ones of `yolo_orch.testing.yolo`.
"""

from __future__ import annotations

import gc
import importlib.util
import itertools
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from yolo_orch.domain import JobKind
from yolo_orch.errors import ErrorCode
from yolo_orch.registry.weights import ResolvedWeights, sha256_file
from yolo_orch.runners.failures import failure_of
from yolo_orch.testing.training import TrainingRecorder, make_dataset
from yolo_orch.testing.yolo import (
    RecordingContext,
    build_checkpoint,
    ensure_ultralytics,
    fixed_resolver,
    make_images,
)

if TYPE_CHECKING:
    import torch
    from torch import nn


def _cuda_count() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


LANES = [f"cuda:{i}" for i in range(_cuda_count())]
PAIRS = list(itertools.combinations(LANES, 2))
IMGSZ = 64

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not LANES, reason="needs a CUDA device"),
]

# Without CUDA the lane lists are empty; one placeholder each keeps the tests collected (and
# skipped by the mark above) rather than dropped as an empty parameter set.
each_lane = pytest.mark.parametrize("lane", LANES or ["cuda:0"])
each_pair = pytest.mark.parametrize(
    "pair",
    PAIRS
    or [pytest.param(("cuda:0", "cuda:1"), marks=pytest.mark.skip(reason="needs two CUDA lanes"))],
    ids=lambda pair: "+".join(pair),
)


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> ResolvedWeights:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    path = build_checkpoint(tmp_path_factory.mktemp("weights") / "tiny.pt")
    return ResolvedWeights(path, sha256_file(path))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    return make_dataset(tmp_path_factory.mktemp("data") / "ds", 16, 4, size=IMGSZ)


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return make_images(tmp_path_factory.mktemp("images"), 4)


def _devices(module: nn.Module) -> set[str]:
    """Where `module`'s weights are: its parameters, or a DataParallel replica's copies (torch
    keeps those out of `parameters()`, in each submodule's `_former_parameters`)."""
    found: set[str] = set()
    for sub in module.modules():
        tensors = [*sub._parameters.values(), *getattr(sub, "_former_parameters", {}).values()]
        found.update(str(t.device) for t in tensors if t is not None)
    return found


class PredictorDevices:
    """Wraps `predict_batch` in the inference runner: records where the predictor's model (the
    copy that runs, not the `YOLO` wrapper's original) has its weights, and its dtypes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from yolo_orch.runners.predict import predict_batch as original

        self.devices: set[str] = set()
        self.dtypes: set[str] = set()

        def recording(model: Any, *args: Any) -> Iterator[Any]:
            for item in original(model, *args):
                # ultralytics 8.4: AutoBackend holds no parameters; its backend's torch module runs
                net = model.predictor.model.backend.model
                self.devices |= _devices(net)
                self.dtypes |= {str(p.dtype) for p in net.parameters()}
                yield item

        monkeypatch.setattr("yolo_orch.runners.inference.predict_batch", recording)


def _inference_runner(weights: ResolvedWeights, base: Path) -> Any:
    from yolo_orch.runners.inference import YoloInferenceRunner

    return YoloInferenceRunner(fixed_resolver({"tiny": weights}), data_roots=[base])


def _infer(runner: Any, workdir: Path, sources: list[Path], lane: str, **params: Any) -> Any:
    ctx = RecordingContext().context(workdir, sources, device=lane, **params)
    return runner.run(ctx)


@each_lane
def test_an_inference_jobs_model_runs_on_its_lane(
    lane: str,
    weights: ResolvedWeights,
    sources: list[Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = PredictorDevices(monkeypatch)
    runner = _inference_runner(weights, sources[0].parent)

    result = _infer(runner, tmp_path / "job", sources, lane, imgsz=IMGSZ)

    assert result.summary["images"] == len(sources)
    assert result.summary["failed_images"] == 0
    assert seen.devices == {lane}
    assert runner.cached_models(lane) == [weights.sha256]


@each_lane
def test_half_inference_runs_in_fp16_on_its_lane(
    lane: str,
    weights: ResolvedWeights,
    sources: list[Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = PredictorDevices(monkeypatch)
    runner = _inference_runner(weights, sources[0].parent)

    result = _infer(runner, tmp_path / "job", sources, lane, imgsz=IMGSZ, half=True)

    assert result.summary["failed_images"] == 0
    assert result.summary["detections"] > 0  # the biased head finds class 0 in fp16 too
    assert seen.devices == {lane}
    assert seen.dtypes == {"torch.float16"}


@each_lane
def test_an_oversized_batch_fails_cuda_oom_and_the_lane_runs_the_next_job(
    lane: str,
    weights: ResolvedWeights,
    sources: list[Path],
    tmp_path: Path,
) -> None:
    import torch

    index = torch.device(lane).index
    total = torch.cuda.get_device_properties(lane).total_memory
    runner = _inference_runner(weights, sources[0].parent)
    gc.collect()  # earlier tests' runners and their cached models: their blocks count too
    torch.cuda.empty_cache()
    # The same cap on every GPU size: this process may use 256 MiB of the lane, which the
    # largest image size needs many times over and the small one fits in.
    torch.cuda.set_per_process_memory_fraction((256 << 20) / total, index)
    try:
        with pytest.raises(RuntimeError) as oom:
            _infer(runner, tmp_path / "too-big", sources, lane, imgsz=4096)
        assert failure_of(oom.value).code is ErrorCode.CUDA_OOM
        assert runner.cached_models(lane) == []  # the lane's models were dropped with it

        result = _infer(runner, tmp_path / "next", sources, lane, imgsz=IMGSZ)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0, index)
    assert result.summary["images"] == len(sources)
    assert result.summary["failed_images"] == 0


class TrainerDevices:
    """Wraps `trainer_class` in the training runner: records where the model's weights are once
    ultralytics has set it up (and the DataParallel wrapper is on, for several lanes)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from yolo_orch.runners.trainers import trainer_class as original

        self.devices: set[str] = set()
        seen = self

        def recording(task: str) -> type[Any]:
            base = original(task)

            class Recording(base):  # type: ignore[misc, valid-type]
                def _setup_train(self) -> None:
                    super()._setup_train()
                    seen.devices |= _devices(self.model)

            return Recording

        monkeypatch.setattr("yolo_orch.runners.training.trainer_class", recording)


def _train(
    base: Path, dataset: Path, lanes: tuple[str, ...], make_parallel: Any = None
) -> dict[str, Any]:
    from yolo_orch.runners.training import YoloTrainingRunner

    def register(path: Path, name: str, job_id: str) -> dict[str, Any]:
        return {"id": name, "name": name}

    extra = {} if make_parallel is None else {"make_parallel": make_parallel}
    runner = YoloTrainingRunner(
        fixed_resolver({}), register, data_roots=[dataset.parent.parent], **extra
    )
    ctx = TrainingRecorder().context(
        base / "job", dataset, devices=lanes, epochs=1, imgsz=IMGSZ, batch=8, workers=0
    )
    summary: dict[str, Any] = runner.run(ctx).summary
    return summary


@each_lane
def test_a_training_jobs_model_is_on_its_lane(
    lane: str, dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = TrainerDevices(monkeypatch)

    summary = _train(tmp_path, dataset, (lane,))

    assert summary["epochs"] == 1
    assert seen.devices == {lane}


class ReplicaDevices:
    """`data_parallel` with a forward hook on the model: each replica records where its input
    and its weights are."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, frozenset[str]]] = []
        self.first_lane: set[str] = set()

    def __call__(self, model: nn.Module, lanes: tuple[str, ...]) -> Any:
        from yolo_orch.runners.trainers import data_parallel

        self.first_lane |= _devices(model)

        def record(module: nn.Module, args: tuple[torch.Tensor, ...], _output: Any) -> None:
            self.calls.append((str(args[0].device), frozenset(_devices(module))))

        model.register_forward_hook(record)
        return data_parallel(model, lanes)


@each_pair
def test_data_parallel_over_two_lanes_runs_a_replica_on_each(
    pair: tuple[str, str], dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = TrainerDevices(monkeypatch)
    replicas = ReplicaDevices()

    summary = _train(tmp_path, dataset, pair, make_parallel=replicas)

    assert summary["epochs"] == 1
    assert seen.devices == {pair[0]}  # the model itself stays on the first lane
    assert replicas.first_lane == {pair[0]}
    split = [(device, weights) for device, weights in replicas.calls if device != "cpu"]
    assert {device for device, _ in split} == set(pair)
    assert all(weights == {device} for device, weights in split)


@each_lane
def test_nvml_reads_every_cuda_lane(lane: str) -> None:
    import torch

    from yolo_orch.ops.telemetry import GpuTelemetry

    index = torch.device(lane).index
    telemetry = GpuTelemetry()
    try:
        assert telemetry.available
        by_index = telemetry.read(index)
        by_uuid = telemetry.read(f"GPU-{torch.cuda.get_device_properties(index).uuid}")
        assert telemetry.health(index) is True
    finally:
        telemetry.close()
    for reading in (by_index, by_uuid):
        assert reading is not None
        total = torch.cuda.get_device_properties(index).total_memory
        assert reading.memory_total_bytes is not None  # NVML's total and CUDA's differ a little
        assert abs(reading.memory_total_bytes - total) < total * 0.05
        fields = (reading.memory_used_bytes, reading.utilization_percent, reading.temperature_c)
        assert None not in fields
        assert reading.power_w is not None


@each_lane
@pytest.mark.skipif(importlib.util.find_spec("tensorrt") is None, reason="tensorrt is missing")
def test_a_tensorrt_engine_exported_on_a_lane_runs_there(
    lane: str, weights: ResolvedWeights, sources: list[Path], tmp_path: Path
) -> None:
    from ultralytics.models import YOLO

    from yolo_orch.runners.export import ExportedFiles, YoloExportRunner

    kept: list[Path] = []

    def register(files: ExportedFiles) -> dict[str, Any]:
        target = tmp_path / "variants" / files.output.name
        target.parent.mkdir()
        target.write_bytes(files.output.read_bytes())
        kept.append(target)
        assert files.lineage.tensorrt_version is not None
        assert files.lineage.gpu_name is not None
        return {"id": "variant-1", "format": str(files.format)}

    runner = YoloExportRunner(fixed_resolver({"tiny-id": weights}), register, data_roots=[])
    ctx = RecordingContext().context(tmp_path / "job", [], device=lane, format="engine", imgsz=64)
    ctx = replace(ctx, job=replace(ctx.job, kind=JobKind.EXPORT, model_id="tiny-id"))

    result = runner.run(ctx)

    assert result.summary["format"] == "engine"
    [engine] = kept
    assert engine.suffix == ".engine"
    engine_model: Any = YOLO(str(engine), task="detect")
    predicted = [  # one image a call: the engine was built for batch 1
        result
        for source in sources
        for result in engine_model.predict(str(source), device=lane, imgsz=64, verbose=False)
    ]
    assert len(predicted) == len(sources)
    assert sum(len(r.boxes) for r in predicted) > 0  # the biased head finds class 0 here too
