"""The GPU host's checks: the `gpu` tests, then training and inference throughput through the real
runners on this host's CUDA lanes, in one table.

The tests (`tests/gpu`, marker `gpu`) run in a pytest subprocess: where each lane's models live,
DataParallel over lane pairs, `half`, CUDA OOM containment, NVML readings, the TensorRT export.
The benchmark trains one short run from `yolo11n.yaml` on a synthetic dataset on 1 lane, and on 2
lanes (the in-process DataParallel split) where the host has them; then runs inference with the
trained model on every lane, in images/second, and 1-image jobs alone against the same jobs sharing
forward passes (cross-job batching's gain on that device). Without CUDA it prints "no CUDA:
skipped" and exits 0; `--cpu` runs the benchmark's path on the CPU, small, as a smoke test (no
tests). On each CUDA lane it also exports the trained model to a TensorRT engine (FP16, static,
built on that lane) through the export runner and compares inference jobs with `format: "engine"`
against the `.pt` with `half` (with `--cpu`, ONNX at FP32 in its place). The engine comparison has
never run on a GPU: only its `--cpu` form has run. It needs `pip install 'yolo-orch[tensorrt]'`
there; without tensorrt its rows say "skipped", like the TensorRT test.

`--wheels FOLDER` first installs every wheel under FOLDER (made by `bench/gpu_wheels.sh`) offline
into FOLDER/site (`pip install --no-index --no-deps --target`), then runs with it on the path:
for a host with Python and torch but no registry. The exit status is 1 when a test failed.

python -m bench.gpu_check [--wheels FOLDER] [--cpu] [--epochs 1] [--images 256] [--imgsz 320]
    [--share 32]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from yolo_orch.testing.training import TrainingRecorder, make_dataset
from yolo_orch.testing.yolo import (
    RecordingContext,
    ensure_ultralytics,
    fixed_resolver,
    make_images,
)

ROOT = Path(__file__).resolve().parent.parent
Row = tuple[str, str, str, str]
"""what, lanes or test, first figure or outcome, second figure."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--wheels", type=Path, help="install these wheels offline first")
    parser.add_argument("--cpu", action="store_true", help="smoke test on the CPU, small")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--images", type=int, help="training images (default 256; 16 with --cpu)")
    parser.add_argument("--imgsz", type=int, help="default 320; 64 with --cpu")
    parser.add_argument("--batch", type=int, help="default 32; 8 with --cpu")
    parser.add_argument("--workers", type=int, help="DataLoader workers (default 2; CPU: 0)")
    parser.add_argument("--predict", type=int, default=64, help="images per inference run")
    parser.add_argument(
        "--share",
        type=int,
        help="1-image jobs per shared forward pass: default 32 (the cuda lanes' "
        "batch_max_images); 8 with --cpu (the cpu lane's)",
    )
    args = parser.parse_args()
    if args.wheels is not None:
        return _run_with_wheels(args.wheels)
    started = time.perf_counter()
    import torch

    if not args.cpu and not torch.cuda.is_available():
        print("no CUDA: skipped (use --cpu for a CPU smoke test)")
        return 0
    rows, failed = ([], False) if args.cpu else _gpu_tests()
    rows += benchmark(args)
    print(f"{'what':<8} {'lanes or test':<72} {'A':>9} {'B':>9}")
    for what, label, first, second in rows:
        print(f"{what:<8} {label:<72} {first:>9} {second:>9}")
    print("test A: its outcome, B: its seconds")
    print("train A: images/s, the whole job (set-up, validation); B: training batches only")
    print("predict A: images/s, the first job (model load, warm-up); B: a second job, warm")
    print("batch N A: images/s of 1-image jobs, each alone; B: N at a time sharing forward")
    print("  passes (batching.run_batch, as a lane runs a batch); issue 13's target: B >= 3 x A")
    print("pt/engine fp16 (CUDA), pt/onnx fp32 (--cpu): the same, the variant exported first")
    if any(what == "engine" for what, *_ in rows):
        print("engine skipped: no tensorrt on this host (the kit leaves it out)")
    print(f"all in {time.perf_counter() - started:.0f} s")
    return 1 if failed else 0


def _run_with_wheels(folder: Path) -> int:
    """Install the kit's wheels into `folder/site` and run this script again with it first on the
    path (the repository's `src` too, so the checked-out code is what runs)."""
    site = folder / "site"
    wheels = sorted(str(path) for path in folder.rglob("*.whl"))
    if not wheels:
        print(f"no wheels under {folder}", file=sys.stderr)
        return 2
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps"]
    subprocess.run([*pip, "--upgrade", "--target", str(site), *wheels], check=True)
    path = [str(site.resolve()), str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
    argv = _without_wheels(sys.argv[1:])
    return subprocess.run([sys.executable, "-m", "bench.gpu_check", *argv], env=env).returncode


def _without_wheels(argv: list[str]) -> list[str]:
    """The command line less `--wheels FOLDER` (or `--wheels=FOLDER`)."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--wheels":
            skip = True
        elif not arg.startswith("--wheels="):
            kept.append(arg)
    return kept


def _gpu_tests() -> tuple[list[Row], bool]:
    """Run the `gpu` tests in a pytest subprocess; one row per test, and whether any failed."""
    with tempfile.TemporaryDirectory(prefix="gpu-tests-") as tmp:
        report = Path(tmp) / "junit.xml"
        command = [sys.executable, "-m", "pytest", "-m", "gpu", "tests/gpu", "-q"]
        command += ["-p", "no:cacheprovider", f"--junitxml={report}"]
        subprocess.run(command, cwd=ROOT)
        if not report.is_file():
            return [("test", "pytest wrote no report", "error", "")], True
        cases = ET.parse(report).getroot().iter("testcase")
        rows: list[Row] = []
        for case in cases:
            outcome = "passed"
            for tag in ("failure", "error", "skipped"):
                if case.find(tag) is not None:
                    outcome = {"failure": "FAILED", "error": "ERROR"}.get(tag, tag)
            seconds = f"{float(case.get('time', 0)):.1f}s"
            rows.append(("test", case.get("name", "?"), outcome, seconds))
    return rows, any(row[2] in ("FAILED", "ERROR") for row in rows)


def benchmark(args: argparse.Namespace) -> list[Row]:
    """Training and inference images/second on this host's lanes (or the CPU with `--cpu`)."""
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        base = Path(tmp)
        ensure_ultralytics(base)  # before anything imports ultralytics
        import torch

        lanes = ["cpu"] if args.cpu else [f"cuda:{i}" for i in range(torch.cuda.device_count())]
        small = args.cpu
        n_train = args.images or (16 if small else 256)
        imgsz = args.imgsz or (64 if small else 320)
        params = {
            "epochs": args.epochs,
            "imgsz": imgsz,
            "batch": args.batch or (8 if small else 32),
            "workers": args.workers if args.workers is not None else (0 if small else 2),
        }
        dataset = make_dataset(base / "data" / "ds", n_train, max(n_train // 4, 2), size=imgsz)
        rows: list[Row] = []
        lane_sets = [tuple(lanes[:1])] + ([tuple(lanes[:2])] if len(lanes) > 1 else [])
        trained: Path | None = None
        for lane_set in lane_sets:
            model, total_s, loop_s = train(base, dataset, lane_set, params)
            trained = trained or model
            images = n_train * args.epochs
            rows.append(("train", "+".join(lane_set), *_speeds(images / total_s, images / loop_s)))
        if trained is None:
            raise RuntimeError("no lane trained a model")
        sources = make_images(base / "predict", args.predict)
        share = args.share or (8 if small else 32)
        for lane in lanes:
            rows.append(("predict", lane, *_speeds(*predict(base, trained, lane, sources, imgsz))))
            alone, shared = batched_vs_alone(base, trained, lane, sources, imgsz, share)
            rows.append((f"batch {share}", lane, *_speeds(alone, shared)))
            if lane.startswith("cuda:") and importlib.util.find_spec("tensorrt") is None:
                rows.append(("engine", lane, "skipped", "tensorrt"))  # as its test does
                continue
            if lane.startswith("cuda:"):
                compared = exported_vs_pt(base, trained, lane, sources, imgsz, "engine", True)
            else:  # the same path as a smoke test, with a format the CPU runs
                compared = exported_vs_pt(base, trained, lane, sources, imgsz, "onnx", False)
            rows.extend(
                (what, label, *_speeds(first, second)) for what, label, first, second in compared
            )
    return rows


def _speeds(first: float, second: float) -> tuple[str, str]:
    return f"{first:.1f}", f"{second:.1f}"


def train(
    base: Path, dataset: Path, lanes: tuple[str, ...], params: dict[str, Any]
) -> tuple[Path, float, float]:
    """Train through the runner; returns the registered best.pt, the job's seconds and the
    seconds from the first to the last training batch."""
    from yolo_orch.runners.training import YoloTrainingRunner

    kept: list[Path] = []

    def register(path: Path, name: str, job_id: str) -> dict[str, Any]:
        target = base / "models" / f"{name}.pt"
        target.parent.mkdir(exist_ok=True)
        target.write_bytes(path.read_bytes())
        kept.append(target)
        return {"id": name, "name": name}

    stamps: list[float] = []
    recorder = TrainingRecorder()
    report = recorder.report

    def timed(progress: Any) -> None:
        stamps.append(time.perf_counter())
        report(progress)

    recorder.report = timed  # type: ignore[method-assign]
    runner = YoloTrainingRunner(fixed_resolver({}), register, data_roots=[dataset.parent.parent])
    workdir = base / "jobs" / "-".join(lane.replace(":", "") for lane in lanes)
    ctx = recorder.context(workdir, dataset, devices=lanes, job_id=workdir.name, **params)
    started = time.perf_counter()
    runner.run(ctx)
    total = time.perf_counter() - started
    return kept[0], total, stamps[-1] - stamps[0]


def predict(
    base: Path, model: Path, lane: str, sources: list[Path], imgsz: int
) -> tuple[float, float]:
    """Images/second of an inference job on `lane`: cold (load and warm-up included), then warm."""
    from yolo_orch.registry.weights import ResolvedWeights, sha256_file
    from yolo_orch.runners.inference import YoloInferenceRunner

    weights = ResolvedWeights(model, sha256_file(model))
    runner = YoloInferenceRunner(fixed_resolver({"trained": weights}), data_roots=[base])
    speeds = []
    for attempt in ("cold", "warm"):
        ctx = RecordingContext().context(
            base / "infer" / attempt, sources, model="trained", device=lane, imgsz=imgsz
        )
        started = time.perf_counter()
        runner.run(ctx)
        speeds.append(len(sources) / (time.perf_counter() - started))
    return speeds[0], speeds[1]


def batched_vs_alone(
    base: Path, model: Path, lane: str, sources: list[Path], imgsz: int, share: int
) -> tuple[float, float]:
    """Images/second of 1-image inference jobs on `lane`, warm: each job alone (`run`), then
    `share` jobs at a time sharing forward passes (`batching.run_batch`)."""
    from dataclasses import replace

    from yolo_orch.registry.weights import ResolvedWeights, sha256_file
    from yolo_orch.runners.base import run_batch
    from yolo_orch.runners.inference import YoloInferenceRunner

    weights = ResolvedWeights(model, sha256_file(model))
    runner = YoloInferenceRunner(fixed_resolver({"trained": weights}), data_roots=[base])

    def jobs(side: str) -> list[Any]:
        folder = base / "batching" / f"{lane.replace(':', '')}-{side}"
        ctxs = [
            RecordingContext().context(
                folder / str(index), [source], model="trained", device=lane, imgsz=imgsz
            )
            for index, source in enumerate(sources)
        ]
        return [replace(ctx, job=replace(ctx.job, id=f"{side}-{i}")) for i, ctx in enumerate(ctxs)]

    runner.run(jobs("warm-up")[0])  # the model loaded on the lane and warmed
    alone = jobs("alone")
    started = time.perf_counter()
    for ctx in alone:
        runner.run(ctx)
    alone_s = time.perf_counter() - started
    shared = jobs("shared")
    started = time.perf_counter()
    for first in range(0, len(shared), share):
        outcomes = run_batch(runner, shared[first : first + share])
        if failed := [outcome for outcome in outcomes if isinstance(outcome, Exception)]:
            raise failed[0]
    shared_s = time.perf_counter() - started
    return len(sources) / alone_s, len(sources) / shared_s


def exported_vs_pt(
    base: Path,
    model: Path,
    lane: str,
    sources: list[Path],
    imgsz: int,
    export_format: str,
    half: bool,
) -> list[tuple[str, str, float, float]]:
    """Export `model` to `export_format` on `lane` with the export runner (on CUDA: an FP16
    TensorRT engine), then time inference jobs on the `.pt` and on the variant (`format`
    named), both with `half`, cold and warm."""
    from dataclasses import replace
    from datetime import UTC, datetime

    from yolo_orch.domain import JobKind
    from yolo_orch.domain.variants import Variant
    from yolo_orch.registry.manifests import copy_tree_hashing
    from yolo_orch.registry.resolutions import ResolvedVariant
    from yolo_orch.registry.weights import ResolvedWeights, sha256_file
    from yolo_orch.runners.export import ExportedFiles, YoloExportRunner
    from yolo_orch.runners.inference import YoloInferenceRunner

    weights = ResolvedWeights(model, sha256_file(model), task="detect")
    registered: list[ResolvedVariant] = []

    def register(files: ExportedFiles) -> dict[str, Any]:
        variant_id = f"{export_format}-{lane.replace(':', '')}"
        folder = base / "variants" / variant_id
        manifest = copy_tree_hashing(files.output, folder, files.output.name)
        variant = Variant(
            id=variant_id,
            model_id=files.model_id,
            format=files.format,
            sha256=manifest.digest,
            size_bytes=manifest.size_bytes,
            files=manifest.files,
            lineage=files.lineage,
            source=files.source,
            job_id=files.job_id,
            created_at=datetime.now(UTC),
        )
        registered.append(ResolvedVariant(variant, folder))
        return {"id": variant_id, "format": str(files.format)}

    resolve = fixed_resolver({"trained": weights})
    exporter = YoloExportRunner(resolve, register, data_roots=[base])
    export_ctx = RecordingContext().context(
        base / "export" / lane.replace(":", ""),
        [],
        model="trained",
        device=lane,
        format=export_format,
        imgsz=imgsz,
        half=half,
    )
    exporter.run(
        replace(export_ctx, job=replace(export_ctx.job, kind=JobKind.EXPORT, model_id="trained"))
    )
    runner = YoloInferenceRunner(
        resolve, data_roots=[base], resolve_variants=lambda model_id: list(registered)
    )
    rows: list[tuple[str, str, float, float]] = []
    precision = "fp16" if half else "fp32"
    for ran in ("pt", export_format):
        speeds = []
        for attempt in ("cold", "warm"):
            ctx = RecordingContext().context(
                base / "infer" / f"{lane.replace(':', '')}-{ran}-{attempt}",
                sources,
                model="trained",
                device=lane,
                imgsz=imgsz,
                half=half,
                format=ran,
            )
            started = time.perf_counter()
            result = runner.run(ctx)
            speeds.append(len(sources) / (time.perf_counter() - started))
            if result.summary["format"] != ran:
                raise RuntimeError(f"asked for {ran}, ran {result.summary['format']}")
        rows.append((f"{ran} {precision}", lane, speeds[0], speeds[1]))
    return rows


if __name__ == "__main__":
    sys.exit(main())
