"""`yolo-orch demo`: train, validate, export and run a detector on generated data, through the
server's HTTP API, on any machine, offline, in a few minutes.

The defaults were measured on a 2-core CPU without a GPU (the whole run is in README.md): 600
training images of 128x128 learn the three shapes to a val mAP50 of 0.99 in 6 epochs (75 s of
training). A few choices follow from ultralytics' trainer, which the server runs as it is:
- At most 10 epochs: ultralytics turns mosaic augmentation off for the last `close_mosaic` (10)
  epochs, so a run that short never uses it (mosaics would shrink 128-pixel images' objects
  further; the demo was not measured with them).
- More images rather than more epochs, and a small batch: the first 100 batches are warm-up, with
  the learning rate ramping up from nothing. 240 images of 160x160 in batches of 16 for 6 epochs
  (90 batches, all warm-up; `auto` optimizer) ended at mAP50 0.
- AdamW at lr0 0.003: the `auto` optimizer picks AdamW at 0.0014 for three classes, which after
  3 epochs had mAP50 0.17 (0.89 at 0.003) and after 6 mAP50-95 0.65 (0.78).
- ONNX for the export: it and OpenVINO took about as long here (export 2.0 s and 1.6 s, a first
  inference 0.2 s and 1.3 s, where OpenVINO compiles its model); the inference job names the
  format, so the exported variant is what runs.
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from yolo_orch.demo.api import DemoApi, DemoFailed, Json
from yolo_orch.demo.dataset import CLASS_NAMES, DatasetSpec, make_dataset
from yolo_orch.demo.server import DemoServer, ServerFailed

__all__ = ["DemoPlan", "DemoReport", "main", "run_demo"]

Echo = Callable[[str], None]
DATASET_FOLDER = "dataset"


@dataclass(frozen=True)
class DemoPlan:
    root: Path = Path("demo")
    """The demo's folder: the dataset, and the data of the server the demo starts."""
    url: str | None = None
    """A running server to use instead of starting one: `root` must be one of its data roots."""
    token: str | None = None
    keep_serving: bool = False
    architecture: str = "yolo11n.yaml"
    epochs: int = 6
    imgsz: int = 128
    batch: int = 8
    lr0: float = 0.003
    optimizer: str = "AdamW"
    dataset: DatasetSpec = field(default_factory=DatasetSpec)
    export_format: str = "onnx"

    def scaled(self, epochs: int | None, imgsz: int | None, train_images: int | None) -> DemoPlan:
        """This plan with a different budget; val and test splits follow the training split."""
        plan = replace(self, epochs=epochs or self.epochs, imgsz=imgsz or self.imgsz)
        train = train_images or plan.dataset.train
        val = max(8, train // 10)
        spec = replace(plan.dataset, train=train, val=val, test=min(12, val), size=plan.imgsz)
        return replace(plan, dataset=spec)


@dataclass
class DemoReport:
    url: str
    model: str
    jobs: dict[str, Json] = field(default_factory=dict)
    """The finished job of each step, by kind."""
    metrics: Json = field(default_factory=dict)
    detected: Counter[str] = field(default_factory=Counter)
    labelled: Counter[str] = field(default_factory=Counter)
    test_images: int = 0
    seconds: float = 0.0

    def render(self, plan: DemoPlan) -> str:
        lines = [
            f"Demo finished in {_duration(self.seconds)}.",
            f"  dashboard   {self.url}/",
            f"  model       {self.model} ({plan.architecture}, {_count(plan.epochs, 'epoch')} "
            f"at imgsz {plan.imgsz} on {plan.dataset.train} generated images)",
            "  jobs",
        ]
        for kind, job in self.jobs.items():
            extra = ""
            if kind == "export":
                extra = (
                    f"  {plan.export_format} variant {(job.get('result') or {}).get('variant_id')}"
                )
            lines.append(f"    {kind:<11} {job['id']}  {_job_seconds(job)}{extra}")
        lines.append(
            f"  validation  mAP50 {self.metrics.get('mAP50', 0.0):.3f}  mAP50-95 "
            f"{self.metrics.get('mAP50-95', 0.0):.3f}  ({plan.dataset.val} val images)"
        )
        per_class = ", ".join(
            f"{name} {self.detected[name]}/{self.labelled[name]}" for name in CLASS_NAMES
        )
        lines.append(
            f"  held out    {self.test_images} test images, detected/labelled per class: "
            f"{per_class}"
        )
        return "\n".join(lines)


def run_demo(plan: DemoPlan, echo: Echo = print) -> DemoReport:
    """Run every step and print what it did; the report. Raises `DemoFailed` or `ServerFailed`
    when a step does not succeed (the server the demo started is stopped either way)."""
    started = time.monotonic()
    root = plan.root.resolve()
    dataset_dir = root / DATASET_FOLDER
    shutil.rmtree(dataset_dir, ignore_errors=True)  # a smaller earlier run's files must not mix in
    echo(f"Generating {_spec_text(plan.dataset)} in {dataset_dir}")
    make_dataset(dataset_dir, plan.dataset)
    server = DemoServer(root) if plan.url is None else None
    try:
        if server is not None:
            echo(f"Starting the server on {server.url} (its log: {server.log_path})")
            server.start()
        url = server.url if server is not None else (plan.url or "").rstrip("/")
        report = DemoReport(url=url, model=f"shapes-{time.strftime('%Y%m%d-%H%M%S')}")
        api = DemoApi(url, plan.token, server, _Progress(echo))
        try:
            _run_steps(api, plan, report)
        finally:
            api.close()
        report.labelled = _labelled(dataset_dir / "labels" / "test")
        report.seconds = time.monotonic() - started
        echo(report.render(plan))
        if server is not None and plan.keep_serving:
            echo(f"Serving on {server.url} until Ctrl-C.")
            try:
                server.wait()
            except KeyboardInterrupt:
                echo("Stopping the server.")
    finally:
        if server is not None:
            server.stop()
    if server is not None:
        echo(
            "The server has stopped. To serve the demo's jobs and model again "
            "(dashboard at http://127.0.0.1:8000/):"
        )
        echo(f"  {server.serve_command()}")
    return report


def _run_steps(api: DemoApi, plan: DemoPlan, report: DemoReport) -> None:
    dataset = f"{DATASET_FOLDER}/data.yaml"
    report.jobs["training"] = api.run_job(
        {
            "kind": "training",
            "model": plan.architecture,
            "dataset": dataset,
            "params": {
                "epochs": plan.epochs,
                "imgsz": plan.imgsz,
                "batch": plan.batch,
                "lr0": plan.lr0,
                "optimizer": plan.optimizer,
                "seed": plan.dataset.seed,
                "output_name": report.model,
            },
        }
    )
    validation = api.run_job(
        {
            "kind": "validation",
            "model": report.model,
            "dataset": dataset,
            "split": "val",
            "params": {"imgsz": plan.imgsz},
        }
    )
    report.jobs["validation"] = validation
    report.metrics = api.result(validation["id"]).get("metrics", {})
    report.jobs["export"] = api.run_job(
        {
            "kind": "export",
            "model": report.model,
            "params": {"format": plan.export_format, "imgsz": plan.imgsz},
        }
    )
    inference = api.run_job(
        {
            "kind": "inference",
            "model": report.model,
            "inputs": [f"{DATASET_FOLDER}/images/test/*.png"],
            "params": {"imgsz": plan.imgsz, "format": plan.export_format},
        }
    )
    report.jobs["inference"] = inference
    images = api.result(inference["id"]).get("images", [])
    report.test_images = len(images)
    report.detected = Counter(
        detection["class_name"] for image in images for detection in image.get("detections", [])
    )


class _Progress:
    """Prints a job's state when it changes, and a training job's epochs as they pass."""

    def __init__(self, echo: Echo) -> None:
        self._echo = echo
        self._last: tuple[str, str, object] = ("", "", None)

    def __call__(self, job: Json) -> None:
        detail = (job.get("progress") or {}).get("detail") or {}
        # Between epochs (while the epoch is validated) progress may carry no epoch: the last
        # one shown still holds.
        last_epoch = self._last[2] if self._last[0] == job["id"] else None
        epoch = detail.get("epoch", last_epoch) if job["kind"] == "training" else None
        seen = (job["id"], job["state"], epoch)
        if seen == self._last:
            return
        self._last = seen
        line = f"  {job['kind']} job {job['id']}: {job['state']}"
        if epoch is not None and job["state"] == "running":
            line += f", epoch {epoch}/{detail.get('epochs')}"
        self._echo(line)


def _labelled(labels: Path) -> Counter[str]:
    return Counter(
        CLASS_NAMES[int(line.split()[0])]
        for path in sorted(labels.glob("*.txt"))
        for line in path.read_text().splitlines()
        if line.strip()
    )


def _spec_text(spec: DatasetSpec) -> str:
    return (
        f"{spec.train}/{spec.val}/{spec.test} train/val/test images of {spec.size}x{spec.size} "
        f"({', '.join(CLASS_NAMES)})"
    )


def _job_seconds(job: Json) -> str:
    if not job.get("started_at") or not job.get("finished_at"):
        return ""
    seconds = (
        datetime.fromisoformat(job["finished_at"]) - datetime.fromisoformat(job["started_at"])
    ).total_seconds()
    return f"({_duration(seconds)})"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{seconds:.1f} s"


def main(plan: DemoPlan, echo: Echo = print) -> int:
    """The command's exit status: 0 when every step succeeded, 1 otherwise (said why)."""
    try:
        run_demo(plan, echo)
    except (DemoFailed, ServerFailed) as exc:
        echo(f"yolo-orch demo: {exc}")
        return 1
    return 0
