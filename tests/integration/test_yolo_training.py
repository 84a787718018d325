"""The YOLO training runner on the CPU: a tiny synthetic dataset, yolo11n from its config."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.yolo_training import Registry, chunked_parallel
from yolo_orch.domain import Progress
from yolo_orch.errors import InvalidJobInput, JobCancelled
from yolo_orch.files.datasets import check_dataset
from yolo_orch.registry.weights import (
    ModelTampered,
    ResolvedWeights,
    inspect_checkpoint,
    sha256_file,
)
from yolo_orch.runners.inference import YoloInferenceRunner
from yolo_orch.runners.trainers import wrap_parallel
from yolo_orch.runners.training import YoloTrainingRunner
from yolo_orch.testing.training import TrainingRecorder, make_dataset
from yolo_orch.testing.yolo import (
    RecordingContext,
    build_checkpoint,
    ensure_ultralytics,
    fixed_resolver,
    make_images,
)

FAST = {"imgsz": 64, "batch": 8}  # 16 train images: 2 batches an epoch


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    root = tmp_path_factory.mktemp("data")
    make_dataset(root / "ds")
    return root


@pytest.fixture(scope="module")
def dataset(data_root: Path) -> Path:
    return check_dataset("ds/data.yaml", [data_root])


def make_runner(data_root: Path, registry: Registry, **kwargs: Any) -> YoloTrainingRunner:
    # One thread: the tests stay quick on a busy 2-core machine (OpenMP spins when oversubscribed).
    return YoloTrainingRunner(
        fixed_resolver({}), registry, data_roots=[data_root], cpu_threads=1, **kwargs
    )


def test_trains_registers_a_usable_model_and_reports_metrics(
    data_root: Path, dataset: Path, tmp_path: Path
) -> None:
    registry = Registry(tmp_path / "models")
    recorder = TrainingRecorder()
    workdir = tmp_path / "job"

    result = make_runner(data_root, registry).run(
        recorder.context(workdir, dataset, epochs=2, output_name="tiny", **FAST)
    )

    assert [p.done for p in recorder.progress] == [0, 1, 2, 2, 3, 4]
    assert {p.total for p in recorder.progress} == {4}
    last = recorder.progress[-1]
    assert (last.done, last.total, last.unit) == (4, 4, "batches")
    assert last.detail is not None
    assert (last.detail["epoch"], last.detail["epochs"]) == (2, 2)
    assert (last.detail["batch"], last.detail["batches"]) == (2, 2)
    assert set(last.detail["loss"]) == {"box_loss", "cls_loss", "dfl_loss"}
    [(kept, name)] = registry.calls
    assert name == "tiny"
    info = inspect_checkpoint(kept)
    assert (info.task, info.class_names) == ("detect", ("red", "green", "blue"))
    history = json.loads((workdir / "metrics.json").read_text())
    assert [entry["epoch"] for entry in history] == [1, 2]
    assert set(history[0]) >= {"train_loss", "val_loss", "precision", "recall", "mAP50", "mAP50-95"}
    assert set(history[0]["train_loss"]) == {"box_loss", "cls_loss", "dfl_loss"}
    assert result.summary == {"model_id": "id-1", "epochs": 2, "metrics": result.detail["metrics"]}
    assert set(result.detail["metrics"]) == {"precision", "recall", "mAP50", "mAP50-95"}
    assert result.detail["history"] == history
    assert result.detail["artifacts"] == ["best.pt", "last.pt", "results.csv"]
    assert sorted(p.name for p in (workdir / "artifacts").iterdir()) == [
        "best.pt",
        "last.pt",
        "results.csv",
    ]

    weights = ResolvedWeights(kept, sha256_file(kept))
    images = make_images(tmp_path / "images", 2)
    inference = YoloInferenceRunner(fixed_resolver({"tiny": weights}), data_roots=[tmp_path])
    predicted = inference.run(RecordingContext().context(tmp_path / "infer", images, imgsz=64))
    assert predicted.summary["images"] == 2
    assert predicted.summary["failed_images"] == 0


def test_chunked_images_give_the_unsplit_loss_and_gradients_with_batchnorm_frozen() -> None:
    import torch
    from torch import nn
    from ultralytics.cfg import get_cfg
    from ultralytics.nn.tasks import DetectionModel

    torch.manual_seed(0)
    model: Any = DetectionModel("yolo11n.yaml", nc=3, verbose=False)  # type: ignore[no-untyped-call]
    model.args = get_cfg()
    model.train()
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.eval()  # per-replica batch statistics would differ from the whole batch's
    batch = {
        "img": torch.rand(4, 3, 64, 64),
        "batch_idx": torch.tensor([0.0, 1.0, 2.0, 3.0, 3.0]),
        "cls": torch.tensor([[0.0], [1.0], [2.0], [0.0], [1.0]]),
        "bboxes": torch.tensor(
            [
                [0.5, 0.5, 0.4, 0.4],
                [0.3, 0.3, 0.2, 0.3],
                [0.6, 0.4, 0.3, 0.2],
                [0.25, 0.25, 0.3, 0.3],
                [0.7, 0.7, 0.2, 0.2],
            ]
        ),
    }

    def loss_and_grads(net: Any) -> tuple[Any, list[Any]]:
        model.zero_grad()
        loss, _ = net(batch)
        loss.sum().backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    whole, whole_grads = loss_and_grads(model)
    calls: list[int] = []
    split, split_grads = loss_and_grads(
        wrap_parallel(model, chunked_parallel(calls)(model, ("a", "b")))
    )

    assert calls == [4]
    torch.testing.assert_close(split, whole, rtol=1e-5, atol=1e-6)
    assert len(split_grads) == len(whole_grads)
    for a, b in zip(split_grads, whole_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_a_whole_training_runs_through_the_parallel_stand_in(
    data_root: Path, dataset: Path, tmp_path: Path
) -> None:
    registry = Registry(tmp_path / "models")
    calls: list[int] = []
    runner = make_runner(data_root, registry, make_parallel=chunked_parallel(calls))

    # Two lanes on one CPU: the stand-in only needs their number.
    ctx = TrainingRecorder().context(
        tmp_path / "job", dataset, devices=("cpu", "cpu"), epochs=2, **FAST
    )
    result = runner.run(ctx)

    assert calls == [8, 8, 8, 8]  # every training batch, whole, went through the split
    assert result.summary["epochs"] == 2
    assert inspect_checkpoint(registry.calls[0][0]).task == "detect"


def test_cancel_mid_epoch_keeps_the_last_completed_epoch(
    data_root: Path, dataset: Path, tmp_path: Path
) -> None:
    import torch

    registry = Registry(tmp_path / "models")
    recorder = TrainingRecorder(cancel_when=lambda p: p.done >= 3)  # first batch of epoch 2
    workdir = tmp_path / "job"

    with pytest.raises(JobCancelled):
        make_runner(data_root, registry).run(recorder.context(workdir, dataset, epochs=2, **FAST))

    assert recorder.progress[-1].done == 3
    assert registry.calls == []
    last = workdir / "train" / "weights" / "last.pt"
    checkpoint = torch.load(last, map_location="cpu", weights_only=False)
    assert checkpoint["epoch"] == 0  # epoch 1, zero-based
    assert checkpoint["optimizer"] is not None  # still resumable
    assert [e["epoch"] for e in json.loads((workdir / "metrics.json").read_text())] == [1]
    published = workdir / "artifacts" / "last.pt"  # for the client to fetch
    assert published.read_bytes() == last.read_bytes()


def test_a_rerun_after_an_interruption_resumes_at_the_next_epoch(
    data_root: Path, dataset: Path, tmp_path: Path
) -> None:
    registry = Registry(tmp_path / "models")
    workdir = tmp_path / "job"
    interrupted = TrainingRecorder(cancel_when=lambda p: p.done >= 3)
    with pytest.raises(JobCancelled):
        make_runner(data_root, registry).run(
            interrupted.context(workdir, dataset, epochs=3, **FAST)
        )
    first_run = json.loads((workdir / "metrics.json").read_text())

    rerun = TrainingRecorder()
    result = make_runner(data_root, registry).run(rerun.context(workdir, dataset, epochs=3, **FAST))

    assert rerun.progress[0] == Progress(2, 6, "batches")  # epoch 2 of 3, not epoch 1
    assert [p.done for p in rerun.progress] == [2, 3, 4, 4, 5, 6]
    history = result.detail["history"]
    assert [e["epoch"] for e in history] == [1, 2, 3]
    assert history[0] == first_run[0]  # kept from the first attempt
    assert result.summary["epochs"] == 3
    assert len(registry.calls) == 1


def test_a_finished_training_found_again_only_registers(
    data_root: Path, dataset: Path, tmp_path: Path
) -> None:
    registry = Registry(tmp_path / "models")
    workdir = tmp_path / "job"
    runner = make_runner(data_root, registry)
    first = runner.run(TrainingRecorder().context(workdir, dataset, epochs=1, **FAST))

    again = TrainingRecorder()
    second = runner.run(again.context(workdir, dataset, epochs=1, **FAST))

    assert again.progress == []  # nothing trained
    assert second.detail["history"] == first.detail["history"]
    assert [name for _, name in registry.calls] == ["train-01234567"] * 2


def test_fine_tunes_a_registry_model_and_refuses_a_changed_file(
    data_root: Path, dataset: Path, tmp_path: Path
) -> None:
    path = build_checkpoint(tmp_path / "base.pt")
    weights = ResolvedWeights(path, sha256_file(path))
    registry = Registry(tmp_path / "models")
    runner = YoloTrainingRunner(
        fixed_resolver({"id-base": weights}), registry, data_roots=[data_root], cpu_threads=1
    )

    def context(workdir: Path) -> Any:
        return TrainingRecorder().context(
            workdir, dataset, model="base", model_id="id-base", epochs=1, **FAST
        )

    result = runner.run(context(tmp_path / "job"))

    assert result.summary["epochs"] == 1
    assert inspect_checkpoint(registry.calls[0][0]).class_names == ("red", "green", "blue")
    with path.open("ab") as f:
        f.write(b"\0")
    with pytest.raises(ModelTampered):
        runner.run(context(tmp_path / "again"))


@pytest.mark.parametrize(
    "model",
    [
        "../yolo11n.yaml",
        "/tmp/yolo11n.yaml",
        "nosuch11n.yaml",
        "rtdetr-l.yaml",
        "yolov8-world.yaml",
    ],
)
def test_only_shipped_configs_of_trainable_heads_are_trained(
    data_root: Path, dataset: Path, tmp_path: Path, model: str
) -> None:
    runner = make_runner(data_root, Registry(tmp_path / "models"))

    with pytest.raises(InvalidJobInput):
        runner.run(TrainingRecorder().context(tmp_path / "job", dataset, model=model, epochs=1))


def test_the_dataset_is_checked_again_when_the_job_starts(data_root: Path, tmp_path: Path) -> None:
    folder = data_root / "changed"
    data_yaml = make_dataset(folder, n_train=1, n_val=1)
    checked = check_dataset("changed/data.yaml", [data_root])
    canary = tmp_path / "canary"
    data = yaml.safe_load(data_yaml.read_text())
    shutil.rmtree(folder / "images" / "val")  # missing val: when ultralytics runs `download`
    data["download"] = f"open({str(canary)!r}, 'w').write('ran')"
    data_yaml.write_text(yaml.safe_dump(data))
    runner = make_runner(data_root, Registry(tmp_path / "models"))

    with pytest.raises(InvalidJobInput, match="download"):
        runner.run(TrainingRecorder().context(tmp_path / "job", checked, epochs=1, **FAST))

    assert not canary.exists()


@pytest.mark.parametrize(
    "params", [{"epochs": 0}, {"batch": -1}, {"lr0": 0}, {"optimizer": "Lion"}, {"workers": "2"}]
)
def test_bad_params_are_invalid_input(
    data_root: Path, dataset: Path, tmp_path: Path, params: dict[str, Any]
) -> None:
    runner = make_runner(data_root, Registry(tmp_path / "models"))

    with pytest.raises(InvalidJobInput):
        runner.run(TrainingRecorder().context(tmp_path / "job", dataset, **params))
