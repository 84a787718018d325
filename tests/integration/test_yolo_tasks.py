"""Inference for every task on the CPU: the runner's results equal ultralytics' own `predict` on
the same checkpoint, images and params; each task's own params; the params a task refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from yolo_orch.errors import InvalidJob, InvalidWeights
from yolo_orch.params.inference import INFERENCE_TASKS, applicable_tasks, check_task
from yolo_orch.registry.weights import ResolvedWeights, inspect_checkpoint, sha256_file
from yolo_orch.runners.inference import YoloInferenceRunner
from yolo_orch.testing.yolo import (
    KEYPOINT_NAMES,
    RecordingContext,
    build_task_checkpoint,
    ensure_ultralytics,
    fixed_resolver,
    make_images,
)

IMGSZ = 96
BOX_PARAMS = {"max_det": 8}
"""Few detections keep masks and keypoints quick; classify, semantic and depth refuse it."""
CLASSIFY_NAMES = tuple(f"class{i}" for i in range(8))
MODELS = ("detect", "segment", "pose", "obb", "classify", "semantic", "depth", "rtdetr")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ResolvedWeights]:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    folder = tmp_path_factory.mktemp("weights")
    built = {}
    for name in MODELS:
        names = CLASSIFY_NAMES if name == "classify" else ("red", "green", "blue")
        path = build_task_checkpoint(folder / f"{name}.pt", name, names)
        built[name] = ResolvedWeights(path, sha256_file(path))
    return built


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return make_images(tmp_path_factory.mktemp("images"), 5)  # the 1st and 5th share a shape


@pytest.fixture(scope="module")
def runner(checkpoints: dict[str, ResolvedWeights], images: list[Path]) -> YoloInferenceRunner:
    return YoloInferenceRunner(
        fixed_resolver(checkpoints), model_cache_size=8, data_roots=[images[0].parent]
    )


def _run(
    runner: YoloInferenceRunner, model: str, images: list[Path], workdir: Path, **params: Any
) -> Any:
    context = RecordingContext().context(workdir, images, model=model, imgsz=IMGSZ, **params)
    return runner.run(context)


def _reference(weights: ResolvedWeights, images: list[Path], **params: Any) -> list[Any]:
    """ultralytics' own predict, one image at a time."""
    from ultralytics.models import YOLO

    model = YOLO(str(weights.path))
    return [
        model.predict(str(path), imgsz=IMGSZ, verbose=False, save=False, **params)[0]
        for path in images
    ]


def _params(model: str) -> dict[str, Any]:
    # Not RT-DETR: many of its untrained queries tie, and which tie makes the cut could differ.
    return BOX_PARAMS if model in ("detect", "segment", "pose", "obb") else {}


@pytest.mark.parametrize("model", MODELS)
def test_results_equal_ultralytics_predict(
    runner: YoloInferenceRunner,
    checkpoints: dict[str, ResolvedWeights],
    images: list[Path],
    tmp_path: Path,
    model: str,
) -> None:
    params = _params(model)
    result = _run(runner, model, images, tmp_path, save_annotated=True, **params)
    expected = _reference(checkpoints[model], images, **params)

    entries = result.detail["images"]
    assert [entry["source"] for entry in entries] == [path.name for path in images]
    artifacts = tmp_path / "artifacts"
    for entry, reference in zip(entries, expected, strict=True):
        assert (entry["height"], entry["width"]) == reference.orig_shape
        assert (artifacts / entry["annotated"]).is_file()
        _COMPARE.get(model, _compare_detect)(entry, reference, artifacts)
    task = "detect" if model == "rtdetr" else model
    assert result.summary["task"] == task
    assert result.summary["images"] == len(images)


def _aligned(ours: list[list[float]], theirs: Any) -> list[int]:
    """For each of our rows, the reference row it equals (within 1e-3): detections of equal
    confidence may come in either order when a batch's arithmetic differs in the last bits."""
    free = list(range(len(theirs)))
    order = []
    assert len(ours) == len(theirs)
    for row in ours:
        match = next(i for i in free if np.allclose(row, theirs[i], atol=1e-3))
        free.remove(match)
        order.append(match)
    return order


def _compare_detect(entry: dict[str, Any], reference: Any, artifacts: Path) -> list[int]:
    detections = entry["detections"]
    assert detections, "the biased head detects something on every image"
    rows = [
        [d["confidence"], d["class_id"], *(d["box"][k] for k in ("x1", "y1", "x2", "y2"))]
        for d in detections
    ]
    boxes = reference.boxes
    expected = np.column_stack([boxes.conf.numpy(), boxes.cls.numpy(), boxes.xyxy.numpy()])
    return _aligned(rows, expected)


def _compare_segment(entry: dict[str, Any], reference: Any, artifacts: Path) -> list[int]:
    order = _compare_detect(entry, reference, artifacts)
    polygons = [d["mask"]["polygons"] for d in entry["detections"]]
    assert len(polygons) == len(reference.masks.xy)
    assert any(polygons), "some mask has a contour"
    for rings, index in zip(polygons, order, strict=True):
        # ultralytics joins a mask's parts into one ring; each part is a ring here
        ours = {(round(x), round(y)) for ring in rings for x, y in ring}
        assert ours == {(round(x), round(y)) for x, y in reference.masks.xy[index].tolist()}
    return order


def _compare_pose(entry: dict[str, Any], reference: Any, artifacts: Path) -> list[int]:
    order = _compare_detect(entry, reference, artifacts)
    keypoints = np.array([d["keypoints"] for d in entry["detections"]], dtype=float)
    assert keypoints.shape == tuple(reference.keypoints.data.shape)
    np.testing.assert_allclose(keypoints, reference.keypoints.data.numpy()[order], atol=1e-3)
    assert all(d["keypoint_names"] == list(KEYPOINT_NAMES) for d in entry["detections"])
    return order


def _compare_obb(entry: dict[str, Any], reference: Any, artifacts: Path) -> None:
    detections = entry["detections"]
    assert detections
    assert all("box" not in d for d in detections)
    rows = [
        [
            d["confidence"],
            *(d["obb"][k] for k in ("cx", "cy", "w", "h", "rotation")),
            *np.ravel(d["obb"]["points"]),
        ]
        for d in detections
    ]
    obb = reference.obb
    expected = np.column_stack(
        [obb.conf.numpy(), obb.xywhr.numpy(), obb.xyxyxyxy.numpy().reshape(len(obb), 8)]
    )
    _aligned(rows, expected)


def _compare_classify(entry: dict[str, Any], reference: Any, artifacts: Path) -> None:
    assert "detections" not in entry
    classes = entry["classes"]
    assert [c["class_id"] for c in classes] == reference.probs.top5
    assert [c["class_name"] for c in classes] == [CLASSIFY_NAMES[i] for i in reference.probs.top5]
    np.testing.assert_allclose(
        [c["confidence"] for c in classes], reference.probs.top5conf.numpy(), atol=1e-3
    )


def _compare_semantic(entry: dict[str, Any], reference: Any, artifacts: Path) -> None:
    import cv2

    expected = [
        {"class_id": r["class"], "class_name": r["name"], "pixel_ratio": r["pixel_ratio"]}
        for r in reference.summary()
    ]
    assert entry["classes"] == expected
    assert sum(c["pixel_ratio"] for c in entry["classes"]) == pytest.approx(1, abs=1e-3)
    written = cv2.imread(str(artifacts / entry["map"]), cv2.IMREAD_UNCHANGED)
    np.testing.assert_array_equal(written, reference.semantic_mask.data.numpy())


def _compare_depth(entry: dict[str, Any], reference: Any, artifacts: Path) -> None:
    depth = reference.depth.data.numpy()
    stats = entry["depth"]
    np.testing.assert_allclose(
        [stats["min"], stats["mean"], stats["max"]],
        [depth.min(), depth.mean(), depth.max()],
        atol=1e-3,
    )
    assert entry["map"].endswith(".npy")
    np.testing.assert_allclose(np.load(artifacts / entry["map"]), depth, atol=1e-5)


_COMPARE = {
    "segment": _compare_segment,
    "pose": _compare_pose,
    "obb": _compare_obb,
    "classify": _compare_classify,
    "semantic": _compare_semantic,
    "depth": _compare_depth,
}


# pycocotools' decode (test only) trips a NumPy 2 deprecation inside its compiled code
@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
def test_segment_masks_as_rle_at_the_image_size_or_not_at_all(
    runner: YoloInferenceRunner, images: list[Path], tmp_path: Path
) -> None:
    from pycocotools import mask as coco_mask

    rle = _run(runner, "segment", images[:2], tmp_path / "rle", mask_format="rle", **BOX_PARAMS)
    polygon = _run(runner, "segment", images[:2], tmp_path / "polygon", **BOX_PARAMS)
    painted = 0
    for entry, other in zip(rle.detail["images"], polygon.detail["images"], strict=True):
        assert len(entry["detections"]) == len(other["detections"])
        for detection in entry["detections"]:
            encoded = detection["mask"]["rle"]
            assert encoded["size"] == [entry["height"], entry["width"]]
            mask = coco_mask.decode({"size": encoded["size"], "counts": encoded["counts"]})
            assert mask.shape == (entry["height"], entry["width"])
            if mask.any():  # the mask lies within its box (a pixel of rounding either way)
                painted += 1
                ys, xs = np.nonzero(mask)
                box = detection["box"]
                assert box["x1"] - 2 <= xs.min()
                assert xs.max() <= box["x2"] + 2
                assert box["y1"] - 2 <= ys.min()
                assert ys.max() <= box["y2"] + 2
    assert painted

    bare = _run(runner, "segment", images[:1], tmp_path / "none", mask_format="none", **BOX_PARAMS)
    detections = bare.detail["images"][0]["detections"]
    assert detections
    assert all("mask" not in d for d in detections)


def test_classify_gives_the_top_k_classes_best_first(
    runner: YoloInferenceRunner, images: list[Path], tmp_path: Path
) -> None:
    result = _run(runner, "classify", images[:2], tmp_path, top_k=3)

    for entry in result.detail["images"]:
        confidences = [c["confidence"] for c in entry["classes"]]
        assert len(confidences) == 3
        assert confidences == sorted(confidences, reverse=True)
    assert result.summary == {
        "task": "classify",
        "images": 2,
        "classified": 2,
        "failed_images": 0,
        "format": "pt",
        "variant_id": None,
    }


def test_depth_map_as_a_16_bit_png_of_millimetres(
    runner: YoloInferenceRunner,
    checkpoints: dict[str, ResolvedWeights],
    images: list[Path],
    tmp_path: Path,
) -> None:
    import cv2

    result = _run(runner, "depth", images[:1], tmp_path, depth_format="png16")

    [entry] = result.detail["images"]
    written = cv2.imread(str(tmp_path / "artifacts" / entry["map"]), cv2.IMREAD_UNCHANGED)
    assert written.dtype == np.uint16
    [reference] = _reference(checkpoints["depth"], images[:1])
    np.testing.assert_allclose(written, reference.depth.data.numpy() * 1000, atol=0.51)
    assert result.summary["maps"] == 1


@pytest.mark.parametrize(
    ("params", "task", "refused"),
    [
        ({"mask_format": "rle"}, "detect", "params.mask_format does not apply to detect models"),
        ({"top_k": 3, "conf": 0.5}, "segment", "params.top_k does not apply to segment models"),
        ({"conf": 0.5, "iou": 0.5}, "classify", "params.conf, params.iou do not apply"),
        ({"classes": [1]}, "depth", "params.classes does not apply to depth models"),
        ({"depth_format": "png16"}, "semantic", "params.depth_format does not apply"),
        ({}, "regress", "the model's task is 'regress'"),
    ],
)
def test_params_the_task_has_no_use_for_are_refused(
    params: dict[str, Any], task: str, refused: str
) -> None:
    with pytest.raises(InvalidJob, match=refused) as caught:
        check_task(params, task)
    assert caught.value.code == "task_mismatch"


def test_params_at_their_defaults_and_the_tasks_own_params_pass() -> None:
    check_task({"imgsz": 640, "conf": 0.25, "iou": 0.7, "max_det": 300}, "classify")
    check_task({"mask_format": "rle", "conf": 0.5, "classes": [0]}, "segment")
    check_task({"classes": [0, 2]}, "semantic")
    check_task({"top_k": 2, "half": True, "save_annotated": True}, "classify")
    assert applicable_tasks("imgsz") == INFERENCE_TASKS
    assert applicable_tasks("mask_format") == ("segment",)


def test_the_runner_refuses_params_the_models_task_has_no_use_for(
    runner: YoloInferenceRunner, images: list[Path], tmp_path: Path
) -> None:
    with pytest.raises(InvalidJob, match="mask_format does not apply to classify"):
        _run(runner, "classify", images[:1], tmp_path, mask_format="polygon")


def test_open_vocabulary_models_are_refused_at_import_and_rtdetr_is_a_detector(
    checkpoints: dict[str, ResolvedWeights], tmp_path: Path
) -> None:
    from ultralytics.models import YOLO
    from ultralytics.nn.tasks import WorldModel

    world = YOLO("yolov8s-worldv2.yaml")
    world.model = WorldModel("yolov8s-worldv2.yaml", nc=3, verbose=False)  # type: ignore[no-untyped-call]
    world.save(tmp_path / "world.pt")
    with pytest.raises(InvalidWeights, match="open-vocabulary"):
        inspect_checkpoint(tmp_path / "world.pt")

    assert inspect_checkpoint(checkpoints["rtdetr"].path).task == "detect"


def test_a_model_of_no_task_inference_runs_is_refused_at_import(tmp_path: Path) -> None:
    from ultralytics.models import YOLO
    from ultralytics.nn.tasks import DetectionModel

    model = YOLO("yolo11n.yaml")
    net = DetectionModel("yolo11n.yaml", nc=1, verbose=False)  # type: ignore[no-untyped-call]
    net.task = "regress"
    model.model = net
    model.save(tmp_path / "odd.pt")

    with pytest.raises(InvalidWeights, match=r"task \(regress\) is none of detect, segment"):
        inspect_checkpoint(tmp_path / "odd.pt")
