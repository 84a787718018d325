"""Training and validation for every task on the CPU: each task's shipped config trains 1 epoch on
a tiny generated dataset, the model it produces has that task, and a validation job on it reports
the task's metrics; each task's loss through the DataParallel stand-in equals the unsplit loss."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pytest

from tests.support.yolo_training import Registry, chunked_parallel
from yolo_orch.domain.results import ValidationResultDetail
from yolo_orch.errors import InvalidJob, JobCancelled
from yolo_orch.files.task_data import check_task_dataset, load_task_dataset
from yolo_orch.registry.weights import ResolvedWeights, inspect_checkpoint, sha256_file
from yolo_orch.runners.trainers import trainer_class, wrap_parallel
from yolo_orch.runners.training import YoloTrainingRunner
from yolo_orch.runners.validation import YoloValidationRunner
from yolo_orch.testing.task_datasets import TASKS, make_task_dataset
from yolo_orch.testing.training import TrainingRecorder
from yolo_orch.testing.yolo import TASK_CONFIGS, ensure_ultralytics, fixed_resolver

FAST = {"imgsz": 64, "batch": 4}  # 8 train images: 2 batches an epoch; 4 val images: 1 batch
RELATIVE = {task: f"{task}/data.yaml" for task in TASKS} | {"classify": "classify"}
SCORES = {
    "detect": {"precision", "recall", "mAP50", "mAP50-95"},
    "obb": {"precision", "recall", "mAP50", "mAP50-95"},
    "segment": {"mAP50", "mAP50-95", "mask_precision", "mask_recall", "mask_mAP50-95"},
    "pose": {"mAP50-95", "pose_precision", "pose_recall", "pose_mAP50", "pose_mAP50-95"},
    "classify": {"top1", "top5"},
    "semantic": {"mIoU", "pixel_acc"},
    "depth": {"delta1", "delta2", "delta3", "abs_rel", "rmse"},
}


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    root = tmp_path_factory.mktemp("tasks")
    for task in TASKS:
        make_task_dataset(task, root / task, n_train=8, n_val=4)
    return root


def checked(task: str, data_root: Path) -> Path:
    path, _ = check_task_dataset(task, RELATIVE[task], [data_root])
    return path


@pytest.fixture(scope="module")
def trained(
    data_root: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[Path, Any]]:
    """Each task's model, trained once for the module: its best.pt and the training result."""
    folder = tmp_path_factory.mktemp("trained")
    registry = Registry(folder / "models")
    runner = YoloTrainingRunner(fixed_resolver({}), registry, data_roots=[data_root], cpu_threads=1)
    models = {}
    for task in TASKS:
        ctx = TrainingRecorder().context(
            folder / task,
            checked(task, data_root),
            model=TASK_CONFIGS[task],
            epochs=1,
            output_name=task,
            **FAST,
        )
        result = runner.run(ctx)
        models[task] = (registry.calls[-1][0], result)
    return models


@pytest.mark.parametrize("task", TASKS)
def test_each_task_trains_and_its_model_has_the_task(
    task: str, trained: dict[str, tuple[Path, Any]]
) -> None:
    path, result = trained[task]

    info = inspect_checkpoint(path)
    assert info.task == task
    # a classify dataset's classes are its folders, sorted
    names = {"depth": ("depth",), "classify": ("blue", "green", "red")}
    assert info.class_names == names.get(task, ("red", "green", "blue"))
    assert result.summary["epochs"] == 1
    assert set(result.summary["metrics"]) >= SCORES[task]
    assert result.detail["artifacts"] == ["best.pt", "last.pt", "results.csv"]


@pytest.mark.parametrize("task", ["pose", "classify"])
def test_a_registry_model_fine_tunes_on_its_task(
    task: str, trained: dict[str, tuple[Path, Any]], data_root: Path, tmp_path: Path
) -> None:
    best = trained[task][0]
    registry = Registry(tmp_path / "models")
    weights = ResolvedWeights(best, sha256_file(best))
    runner = YoloTrainingRunner(
        fixed_resolver({"id-m": weights}), registry, data_roots=[data_root], cpu_threads=1
    )
    ctx = TrainingRecorder().context(
        tmp_path / "job", checked(task, data_root), model=task, model_id="id-m", epochs=1, **FAST
    )

    result = runner.run(ctx)

    assert result.summary["epochs"] == 1
    assert inspect_checkpoint(registry.calls[0][0]).task == task


def validate(
    task: str, data_root: Path, best: Path, workdir: Path, **kwargs: Any
) -> tuple[Any, TrainingRecorder]:
    weights = ResolvedWeights(best, sha256_file(best))
    runner = YoloValidationRunner(
        fixed_resolver({"id-m": weights}), data_roots=[data_root], cpu_threads=1
    )
    recorder = TrainingRecorder(kwargs.pop("cancel_when", None))
    ctx = recorder.context(
        workdir,
        checked(task, data_root),
        model=task,
        model_id="id-m",
        kind="validation",
        split="val",
        **{"imgsz": 64, "batch": 2, **kwargs},
    )
    return runner.run(ctx), recorder


@pytest.mark.parametrize("task", TASKS)
def test_a_validation_reports_the_task_metrics_and_plots(
    task: str, trained: dict[str, tuple[Path, Any]], data_root: Path, tmp_path: Path
) -> None:
    result, recorder = validate(task, data_root, trained[task][0], tmp_path / "val")

    assert [(p.done, p.total) for p in recorder.progress] == [(0, 2), (1, 2), (2, 2)]
    detail = result.detail
    ValidationResultDetail.model_validate(detail)  # the shape the OpenAPI document gives it
    assert (detail["task"], detail["split"], detail["images"]) == (task, "val", 4)
    assert set(detail["metrics"]) >= SCORES[task]
    assert result.summary["metrics"] == detail["metrics"]
    assert set(detail["speed_ms_per_image"]) == {"preprocess", "inference", "loss", "postprocess"}
    artifacts = set(detail["artifacts"])
    assert artifacts == {p.name for p in (tmp_path / "val" / "artifacts").iterdir()}
    if task in ("detect", "segment", "pose", "obb"):
        # Each curve has a series per class the split's labels have, as the table's rows.
        assert detail["curves"], task
        for curve in detail["curves"]:
            assert len(curve["x"]) == len(next(iter(curve["y"].values()))) <= 101
            assert set(curve["y"]) == {row["Class"] for row in detail["per_class"]}
    else:
        assert detail["curves"] == []
    if task == "depth":
        assert detail["confusion_matrix"] is None
        assert detail["per_class"] == []
        return
    matrix = detail["confusion_matrix"]
    names = ["blue", "green", "red"] if task == "classify" else ["red", "green", "blue"]
    with_background = names if task in ("classify", "semantic") else [*names, "background"]
    assert matrix["names"] == with_background
    assert [len(row) for row in matrix["matrix"]] == [len(matrix["names"])] * len(matrix["names"])
    assert "confusion_matrix.png" in artifacts
    if task == "classify":
        assert detail["per_class"] == []
        return
    assert any(name.endswith("PR_curve.png") for name in artifacts) or task == "semantic"
    rows = list(csv.DictReader(io.StringIO((tmp_path / "val/artifacts/per_class.csv").read_text())))
    assert [row["Class"] for row in rows] == [row["Class"] for row in detail["per_class"]]
    assert {row["Class"] for row in rows} <= set(names)


def test_a_validation_is_cancelled_between_batches(
    trained: dict[str, tuple[Path, Any]], data_root: Path, tmp_path: Path
) -> None:
    with pytest.raises(JobCancelled):
        validate(
            "detect", data_root, trained["detect"][0], tmp_path, cancel_when=lambda p: p.done >= 1
        )


@pytest.mark.parametrize("task", TASKS)
def test_each_task_loss_through_the_parallel_stand_in_equals_the_unsplit_loss(
    task: str, data_root: Path, tmp_path: Path
) -> None:
    """A real batch of the task (its keys: masks, keypoints, cls, depth, ...) from ultralytics'
    own loader, the model's loss on it whole and with the images split in two."""
    import torch
    import yaml
    from torch import nn

    dataset = load_task_dataset(task, checked(task, data_root), [data_root])
    if task == "classify":
        data = str(checked(task, data_root))
    else:
        data_yaml = tmp_path / "data.yaml"
        data_yaml.write_text(yaml.safe_dump(dataset.for_ultralytics()))  # type: ignore[union-attr]
        data = str(data_yaml)
    overrides = {
        "model": TASK_CONFIGS[task],
        "data": data,
        "epochs": 1,
        "device": "cpu",
        "workers": 0,
        "plots": False,
        "amp": False,
        "project": str(tmp_path),
        "name": "train",
        "verbose": False,
        **FAST,
    }
    trainer = trainer_class(task)(overrides=overrides)
    trainer._setup_train()
    batch = trainer.preprocess_batch(next(iter(trainer.train_loader)))
    model: Any = trainer.model
    model.train()
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):
            module.eval()  # per-replica batch statistics would differ from the whole batch's

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
    assert float(whole.sum()) > 0
    torch.testing.assert_close(split, whole, rtol=1e-5, atol=1e-6)
    assert len(split_grads) == len(whole_grads) > 0
    for a, b in zip(split_grads, whole_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("task", "dataset", "why"),
    [
        ("classify", "detect/data.yaml", "image folder"),
        ("detect", "classify", "data.yaml"),
        ("pose", "detect/data.yaml", "kpt_shape"),
        ("detect", "pose/data.yaml", "pose dataset"),
        ("segment", "semantic/data.yaml", "semantic dataset"),
        ("segment", "detect/data.yaml", "polygons"),
        ("obb", "detect/data.yaml", "4 corners"),
        ("depth", "detect/data.yaml", "depth"),
        ("detect", "depth/data.yaml", "depth dataset"),
        ("rtdetr", "detect/data.yaml", "cannot train"),
    ],
)
def test_a_dataset_of_another_task_is_task_mismatch(
    task: str, dataset: str, why: str, data_root: Path
) -> None:
    with pytest.raises(InvalidJob, match=why) as raised:
        check_task_dataset(task, dataset, [data_root])

    assert raised.value.code == "task_mismatch"
