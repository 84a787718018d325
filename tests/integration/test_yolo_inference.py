"""The YOLO inference runner on the CPU, end to end, with a real (untrained) yolo11n checkpoint."""

from __future__ import annotations

import shutil
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest

from yolo_orch.domain import Progress
from yolo_orch.domain.specs import InferenceSpec
from yolo_orch.errors import InvalidJobInput, JobCancelled
from yolo_orch.params.inference import InferenceParams
from yolo_orch.registry.weights import ModelTampered, ResolvedWeights, sha256_file
from yolo_orch.runners.inference import YoloInferenceRunner
from yolo_orch.runners.model_cache import ModelCache
from yolo_orch.testing.yolo import (
    RecordingContext,
    build_checkpoint,
    ensure_ultralytics,
    fixed_resolver,
    make_images,
    write_corrupt,
)

IMGSZ = 128  # small and quick; the images are 96-200 px wide


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> ResolvedWeights:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    path = build_checkpoint(tmp_path_factory.mktemp("weights") / "tiny.pt")
    return ResolvedWeights(path, sha256_file(path))


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return make_images(tmp_path_factory.mktemp("images"), 3)


@pytest.fixture
def runner(
    weights: ResolvedWeights, tmp_path_factory: pytest.TempPathFactory
) -> YoloInferenceRunner:
    return YoloInferenceRunner(
        fixed_resolver({"tiny": weights}),
        model_cache_size=2,
        data_roots=[tmp_path_factory.getbasetemp()],
    )


def test_runs_images_reports_progress_and_isolates_a_corrupt_file(
    runner: YoloInferenceRunner, images: list[Path], tmp_path: Path
) -> None:
    import cv2

    corrupt = write_corrupt(tmp_path / "broken.jpg")
    recorder = RecordingContext()
    inputs = [images[0], corrupt, images[1], images[2]]

    result = runner.run(recorder.context(tmp_path / "job", inputs, imgsz=IMGSZ, max_det=4))

    assert recorder.progress == [Progress(i, 4, "images") for i in range(5)]
    detail = result.detail["images"]
    assert [entry["source"] for entry in detail] == [p.name for p in inputs]
    assert detail[1] == {"source": corrupt.name, "error": "cannot decode the file as an image"}
    for entry, path in zip([detail[0], *detail[2:]], images, strict=True):
        pixels = cv2.imread(str(path))
        assert pixels is not None
        height, width = pixels.shape[:2]
        assert (entry["width"], entry["height"]) == (width, height)
        assert 1 <= len(entry["detections"]) <= 4  # the head is biased to find class 0
        for detection in entry["detections"]:
            assert detection["class_id"] == 0
            assert detection["class_name"] == "red"
            assert 0.0 <= detection["confidence"] <= 1.0
            box = detection["box"]
            assert 0 <= box["x1"] <= box["x2"] <= width
            assert 0 <= box["y1"] <= box["y2"] <= height
    detections = sum(len(entry.get("detections", [])) for entry in detail)
    assert result.summary == {
        "task": "detect",
        "images": 4,
        "detections": detections,
        "failed_images": 1,
        "format": "pt",
        "variant_id": None,
    }
    assert not (tmp_path / "job" / "artifacts").exists()


def test_a_missing_file_fails_only_that_image(
    runner: YoloInferenceRunner, images: list[Path], tmp_path: Path
) -> None:
    missing = tmp_path / "gone.jpg"

    result = runner.run(RecordingContext().context(tmp_path, [missing, images[0]], imgsz=IMGSZ))

    assert result.detail["images"][0]["error"].startswith("cannot read the file")
    assert result.summary["failed_images"] == 1


def test_thresholds_are_applied(
    runner: YoloInferenceRunner, images: list[Path], tmp_path: Path
) -> None:
    strict = runner.run(RecordingContext().context(tmp_path, images, imgsz=IMGSZ, conf=0.999))
    other_class = runner.run(RecordingContext().context(tmp_path, images, imgsz=IMGSZ, classes=[1]))

    assert strict.summary["detections"] == 0
    assert other_class.summary["detections"] == 0


def test_cancel_stops_between_images(
    runner: YoloInferenceRunner, weights: ResolvedWeights, images: list[Path], tmp_path: Path
) -> None:
    recorder = RecordingContext(cancel_after=1)

    with pytest.raises(JobCancelled):
        runner.run(recorder.context(tmp_path, images, imgsz=IMGSZ))

    assert [p.done for p in recorder.progress] == [0, 1]
    assert runner.cached_models("cpu") == [weights.sha256]  # the model is kept for the next job


def test_the_second_job_reuses_the_loaded_model(
    runner: YoloInferenceRunner, weights: ResolvedWeights, images: list[Path], tmp_path: Path
) -> None:
    assert runner.cached_models("cpu") == []

    runner.run(RecordingContext().context(tmp_path, images[:1], imgsz=IMGSZ))
    runner.run(RecordingContext().context(tmp_path, images[1:], imgsz=IMGSZ, conf=0.5))

    assert runner.loads == 1
    assert runner.cached_models("cpu") == [weights.sha256]


def test_concurrent_jobs_never_share_an_instance(
    runner: YoloInferenceRunner, weights: ResolvedWeights, images: list[Path], tmp_path: Path
) -> None:
    from ultralytics.models import YOLO

    both_inside = threading.Barrier(2, timeout=30)
    users: dict[int, set[int]] = {}
    original = YOLO.predict

    def tracking_predict(self: Any, *args: Any, **kwargs: Any) -> Any:
        users.setdefault(id(self), set()).add(threading.get_ident())
        return original(self, *args, **kwargs)

    class Waiting(RecordingContext):
        def should_cancel(self) -> bool:
            if len(self.progress) == 1:  # both jobs hold a model before either predicts
                both_inside.wait()
            return False

    errors: list[BaseException] = []

    def job(name: str) -> None:
        try:
            runner.run(Waiting().context(tmp_path / name, images[:2], imgsz=IMGSZ))
        except BaseException as e:
            errors.append(e)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(YOLO, "predict", tracking_predict)
        threads = [threading.Thread(target=job, args=(name,)) for name in ("a", "b")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)

    assert errors == []
    assert runner.loads == 2
    assert len(users) == 2
    assert all(len(threads_using) == 1 for threads_using in users.values())
    assert runner.cached_models("cpu") == [weights.sha256]  # one idle instance is kept


def test_the_cache_is_bounded_and_least_recently_used_goes_first(
    weights: ResolvedWeights, images: list[Path], tmp_path: Path
) -> None:
    other_path = build_checkpoint(tmp_path / "other.pt", class_names=("cat",))
    other = ResolvedWeights(other_path, sha256_file(other_path))
    runner = YoloInferenceRunner(
        fixed_resolver({"a": weights, "b": other}), model_cache_size=1, data_roots=[tmp_path.parent]
    )

    for model in ("a", "b", "a"):
        ctx = RecordingContext().context(tmp_path, images[:1], model=model, imgsz=IMGSZ)
        runner.run(ctx)

    assert runner.loads == 3
    assert runner.cached_models("cpu") == [weights.sha256]


def test_a_changed_weights_file_is_refused(images: list[Path], tmp_path: Path) -> None:
    path = build_checkpoint(tmp_path / "tampered.pt")
    expected = sha256_file(path)
    with path.open("ab") as f:
        f.write(b"\0")
    runner = YoloInferenceRunner(
        fixed_resolver({"m": ResolvedWeights(path, expected)}), data_roots=[tmp_path.parent]
    )

    with pytest.raises(ModelTampered) as caught:
        runner.run(RecordingContext().context(tmp_path, images[:1], model="m", imgsz=IMGSZ))

    assert caught.value.code == "model_tampered"
    assert runner.loads == 0
    assert runner.cached_models("cpu") == []


def test_save_annotated_writes_jpegs_to_artifacts(
    runner: YoloInferenceRunner, images: list[Path], tmp_path: Path
) -> None:
    import cv2

    corrupt = write_corrupt(tmp_path / "broken.jpg")
    ctx = RecordingContext().context(
        tmp_path / "job", [*images, corrupt], imgsz=IMGSZ, save_annotated=True
    )

    result = runner.run(ctx)

    artifacts = tmp_path / "job" / "artifacts"
    names = sorted(p.name for p in artifacts.iterdir())
    assert names == ["00000_img0.jpg", "00001_img1.jpg", "00002_img2.jpg"]  # no temp files left
    for entry, name, source in zip(result.detail["images"], names, images, strict=False):
        assert entry["annotated"] == name
        annotated = cv2.imread(str(artifacts / name))
        assert annotated is not None
        original = cv2.imread(str(source))
        assert original is not None
        assert annotated.shape == original.shape


def test_out_of_memory_drops_the_lane_cache(
    runner: YoloInferenceRunner,
    images: list[Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch
    from ultralytics.models import YOLO

    runner.run(RecordingContext().context(tmp_path, images[:1], imgsz=IMGSZ))
    assert runner.cached_models("cpu") != []

    def out_of_memory(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(YOLO, "predict", out_of_memory)

    with pytest.raises(RuntimeError, match="out of memory") as caught:
        runner.run(RecordingContext().context(tmp_path, images[:1], imgsz=IMGSZ))

    assert not isinstance(caught.value, torch.cuda.OutOfMemoryError)
    assert caught.value.args[0].startswith("CUDA out of memory: ")
    assert runner.cached_models("cpu") == []


@pytest.mark.parametrize(
    ("spec_inputs", "params"),
    [
        ([], {}),
        ([{"path": "relative/image.jpg", "name": "image.jpg"}], {}),
        (None, {"imgsz": "big"}),
        (None, {"conf": 1.5}),
        (None, {"classes": ["person"]}),
        (None, {"half": "yes"}),
    ],
)
def test_unusable_input_is_refused_before_loading(
    runner: YoloInferenceRunner,
    images: list[Path],
    tmp_path: Path,
    spec_inputs: list[Any] | None,
    params: dict[str, Any],
) -> None:
    ctx = RecordingContext().context(tmp_path, images[:1], **params)
    if spec_inputs is not None:
        spec = InferenceSpec.model_validate({**ctx.job.spec.stored(), "files": spec_inputs})
        ctx = replace(ctx, job=replace(ctx.job, spec=spec))

    with pytest.raises(InvalidJobInput):
        runner.run(ctx)

    assert runner.loads == 0


def test_a_model_copied_elsewhere_with_the_same_content_is_the_same_cache_entry(
    runner: YoloInferenceRunner, weights: ResolvedWeights, images: list[Path], tmp_path: Path
) -> None:
    copy = tmp_path / "copy.pt"
    shutil.copyfile(weights.path, copy)
    runner_two_refs = YoloInferenceRunner(
        fixed_resolver({"a": weights, "b": ResolvedWeights(copy, weights.sha256)}),
        data_roots=[tmp_path.parent],
    )

    for model in ("a", "b"):
        ctx = RecordingContext().context(tmp_path, images[:1], model=model, imgsz=IMGSZ)
        runner_two_refs.run(ctx)

    assert runner_two_refs.loads == 1


# --- batching: one forward pass per chunk and shape, per-image behaviour kept ---


@pytest.fixture(scope="module")
def many_images(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return make_images(tmp_path_factory.mktemp("many"), 10, seed=3)  # 4 shapes, cycling


def _counting_predict(patch: pytest.MonkeyPatch) -> list[int]:
    """Patch YOLO.predict to record how many images each call got (warm-up calls included)."""
    from ultralytics.models import YOLO

    sizes: list[int] = []
    original = YOLO.predict

    def counting(self: Any, source: Any = None, *args: Any, **kwargs: Any) -> Any:
        sizes.append(len(source) if isinstance(source, list) else 1)
        return original(self, source, *args, **kwargs)

    patch.setattr(YOLO, "predict", counting)
    return sizes


def _boxes(entry: dict[str, Any]) -> list[float]:
    return [
        value
        for d in entry.get("detections", [])
        for value in (d["class_id"], d["confidence"], *d["box"].values())
    ]


def test_images_of_one_shape_are_predicted_in_one_batch_with_per_image_results(
    runner: YoloInferenceRunner,
    many_images: list[Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import yolo_orch.runners.decode as inference

    corrupt = write_corrupt(tmp_path / "broken.jpg")
    inputs = [*many_images[:5], corrupt, *many_images[5:]]
    runner.run(RecordingContext().context(tmp_path, inputs[:1], imgsz=IMGSZ))  # load + warm up
    sizes = _counting_predict(monkeypatch)
    recorder = RecordingContext()

    batched = runner.run(recorder.context(tmp_path / "a", inputs, imgsz=IMGSZ))

    assert sorted(sizes) == [2, 2, 3, 3]  # 10 decodable images, 4 shapes, one chunk
    assert recorder.progress == [Progress(i, 11, "images") for i in range(12)]
    detail = batched.detail["images"]
    assert [entry["source"] for entry in detail] == [p.name for p in inputs]  # input order
    assert detail[5] == {"source": corrupt.name, "error": "cannot decode the file as an image"}
    assert batched.summary["failed_images"] == 1

    monkeypatch.setattr(inference, "MAX_BATCH", 1)  # one image per predict, as before batching
    sizes.clear()
    single = runner.run(RecordingContext().context(tmp_path / "b", inputs, imgsz=IMGSZ))

    assert sizes == [1] * 10
    assert batched.summary == single.summary
    for one, other in zip(detail, single.detail["images"], strict=True):
        assert {k: v for k, v in one.items() if k != "detections"} == {
            k: v for k, v in other.items() if k != "detections"
        }
        assert _boxes(one) == pytest.approx(_boxes(other), abs=0.05)


def test_chunks_are_bounded_by_count_and_by_decoded_size(
    runner: YoloInferenceRunner,
    many_images: list[Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import yolo_orch.runners.decode as inference

    same_shape = many_images[::4]  # 3 images of one shape
    runner.run(RecordingContext().context(tmp_path, same_shape[:1], imgsz=IMGSZ))
    sizes = _counting_predict(monkeypatch)

    monkeypatch.setattr(inference, "MAX_BATCH", 2)
    runner.run(RecordingContext().context(tmp_path, same_shape, imgsz=IMGSZ))
    assert sizes == [2, 1]

    sizes.clear()
    monkeypatch.setattr(inference, "MAX_BATCH", 16)
    monkeypatch.setattr(inference, "MAX_CHUNK_BYTES", 1)  # every decoded image fills a chunk
    runner.run(RecordingContext().context(tmp_path, same_shape, imgsz=IMGSZ))
    assert sizes == [1, 1, 1]


def test_cancel_inside_a_batch_stops_and_releases_the_predictor(
    runner: YoloInferenceRunner, weights: ResolvedWeights, many_images: list[Path], tmp_path: Path
) -> None:
    same_shape = many_images[::4]
    recorder = RecordingContext(cancel_after=1)

    with pytest.raises(JobCancelled, match="after 1 of 3") as caught:
        runner.run(recorder.context(tmp_path, same_shape, imgsz=IMGSZ))

    assert [p.done for p in recorder.progress] == [0, 1]
    # The stream was closed at once, not when the exception (whose traceback holds the runner's
    # frames, and so the suspended generator) is collected: the predictor's lock is free.
    [model] = runner._cache._lane("cpu").idle.values()
    assert model.predictor is not None
    assert model.predictor._lock.acquire(blocking=False)
    model.predictor._lock.release()
    assert caught.value.__traceback__ is not None  # still held up to here
    result = runner.run(RecordingContext().context(tmp_path, same_shape, imgsz=IMGSZ))
    assert result.summary["images"] == 3
    assert runner.loads == 1


def test_a_cancel_after_the_last_image_does_not_fail_the_finished_job(
    runner: YoloInferenceRunner, images: list[Path], tmp_path: Path
) -> None:
    recorder = RecordingContext(cancel_after=len(images))

    result = runner.run(recorder.context(tmp_path, images, imgsz=IMGSZ))

    assert result.summary["images"] == len(images)


def test_batch_size_keeps_the_pixel_budget_of_16_images_at_640() -> None:
    from yolo_orch.runners.decode import batch_size as _batch_size

    assert [_batch_size(s) for s in (128, 320, 452, 640, 1280, 2560, 8192)] == [
        32,
        32,
        32,
        16,
        4,
        1,
        1,
    ]


@pytest.mark.parametrize(("cores", "threads"), [(None, 1), (1, 1), (2, 1), (16, 15)])
def test_the_cpu_lane_leaves_a_core_to_the_server(
    monkeypatch: pytest.MonkeyPatch, cores: int | None, threads: int
) -> None:
    from yolo_orch.runners.inference import default_cpu_threads

    monkeypatch.setattr("os.cpu_count", lambda: cores)

    assert default_cpu_threads() == threads


class _CountersUnderTheCacheLock(ModelCache):
    """Fails a write to the cache-wide counters made without `_lanes_lock` held (the counters
    are shared by all lanes; a lane's own lock does not serialise them)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("hits", "loads") and hasattr(self, name):
            assert self._lanes_lock.locked(), f"{name} written without _lanes_lock"
        super().__setattr__(name, value)


def test_cache_hits_are_counted_under_the_cache_wide_lock() -> None:
    # The race itself (two lanes incrementing at once) cannot be made deterministic: this
    # checks the mechanism, that every increment holds the lock the other lanes take too.
    cache = _CountersUnderTheCacheLock(2)
    for device in ("cpu", "cuda:0", "cpu", "cuda:0"):
        with cache.checkout(device, "0" * 64, lambda: cast(Any, object())):
            pass

    assert (cache.hits, cache.loads) == (2, 2)


@pytest.mark.parametrize(
    ("params", "ok"),
    [
        ({"imgsz": 4096}, True),
        ({"imgsz": 4097}, False),
        ({"max_det": 1_000}, True),
        ({"max_det": 1_001}, False),
    ],
)
def test_the_runner_checks_the_api_limits(params: dict[str, Any], ok: bool) -> None:
    if ok:
        InferenceParams.from_job(params)
    else:
        with pytest.raises(InvalidJobInput):
            InferenceParams.from_job(params)
