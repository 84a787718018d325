"""Video inputs through the YOLO inference runner on the CPU: frames, windows, tracking against
ultralytics' own `track`, the annotated mp4, cancel, unreadable files and bounded memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from yolo_orch.domain import Progress
from yolo_orch.domain.results import InferenceResultDetail
from yolo_orch.errors import InvalidJobInput, JobCancelled
from yolo_orch.params.inference import BOTSORT_SETTINGS, TrackerSettings
from yolo_orch.registry.weights import ResolvedWeights, sha256_file
from yolo_orch.runners.inference import YoloInferenceRunner
from yolo_orch.runners.tracking import FrameTracker, tracker_config
from yolo_orch.testing.video import frame_count, make_video
from yolo_orch.testing.yolo import (
    CLASS_NAMES,
    RecordingContext,
    build_task_checkpoint,
    ensure_ultralytics,
    fixed_resolver,
    make_images,
    write_corrupt,
)

IMGSZ = 128
FRAMES = 36


def build_video_checkpoint(path: Path) -> Path:
    """An untrained yolo11n that finds class 0 everywhere, its class-0 scores made to depend on
    the pixels (scaled weights), so that with a small `max_det` which boxes a frame keeps
    changes as the shapes move: tracks start, get lost and are found again."""
    import torch
    from ultralytics.models import YOLO
    from ultralytics.nn.tasks import DetectionModel

    with torch.random.fork_rng():
        torch.manual_seed(0)
        net: Any = DetectionModel("yolo11n.yaml", nc=len(CLASS_NAMES), verbose=False)  # type: ignore[no-untyped-call]
    net.names = dict(enumerate(CLASS_NAMES))
    net.task = "detect"
    with torch.no_grad():
        for branch in net.model[-1].cv3:
            branch[-1].bias.fill_(-10.0)
            branch[-1].bias[0] = -0.5
            branch[-1].weight[0] *= 20
    model = YOLO("yolo11n.yaml", task="detect")
    model.model = net
    path.parent.mkdir(parents=True, exist_ok=True)
    model.save(path)
    return path


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ensure_ultralytics(tmp_path_factory.getbasetemp())
    return tmp_path_factory.getbasetemp()


@pytest.fixture(scope="module")
def weights(base: Path, tmp_path_factory: pytest.TempPathFactory) -> ResolvedWeights:
    path = build_video_checkpoint(tmp_path_factory.mktemp("weights") / "tiny.pt")
    return ResolvedWeights(path, sha256_file(path))


@pytest.fixture(scope="module")
def video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("videos") / "clip.mp4"
    make_video(path, frames=FRAMES, objects=3)
    return path


@pytest.fixture
def runner(weights: ResolvedWeights, base: Path) -> YoloInferenceRunner:
    return YoloInferenceRunner(fixed_resolver({"tiny": weights}), data_roots=[base])


def frames_of(workdir: Path, entry: dict[str, Any]) -> list[dict[str, Any]]:
    lines = (workdir / "artifacts" / entry["frames"]).read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.parametrize("tracker", ["bytetrack", "botsort"])
def test_tracks_match_ultralytics_own_track_on_the_same_file(
    runner: YoloInferenceRunner,
    weights: ResolvedWeights,
    video: Path,
    tmp_path: Path,
    tracker: str,
) -> None:
    from ultralytics.models import YOLO

    settings = {"imgsz": IMGSZ, "conf": 0.1, "max_det": 10}
    result = runner.run(
        RecordingContext().context(tmp_path / "job", [video], track=tracker, **settings)
    )

    entry = result.detail["images"][0]
    ours = {
        frame["frame"]: sorted(d["track_id"] for d in frame["detections"])
        for frame in frames_of(tmp_path / "job", entry)
    }
    theirs: dict[int, list[int]] = {}
    spans: dict[int, list[int]] = {}
    direct = YOLO(str(weights.path))
    for frame, res in enumerate(
        direct.track(str(video), stream=True, tracker=f"{tracker}.yaml", verbose=False, **settings)
    ):
        ids = res.boxes.id.int().tolist() if res.boxes.is_track else []
        theirs[frame] = sorted(ids)
        for track_id in ids:
            spans.setdefault(track_id, [frame, frame])[1] = frame
    assert any(first > 0 or last < FRAMES - 1 for first, last in spans.values()), (
        "every track spans the whole video: the test would prove little"
    )
    assert ours == theirs
    tracks = entry["tracks"]
    assert tracks["count"] == len(spans)
    assert tracks["per_class"] == {"red": len(spans)}
    assert {t["track_id"]: [t["first_frame"], t["last_frame"]] for t in tracks["tracks"]} == spans
    assert result.summary["tracks_per_class"] == {"red": len(spans)}
    InferenceResultDetail.model_validate(result.detail)


@pytest.mark.parametrize("task", ["segment", "pose", "obb"])
def test_every_box_task_tracks_as_ultralytics_does(
    base: Path, video: Path, tmp_path: Path, task: str
) -> None:
    from ultralytics.models import YOLO

    path = build_task_checkpoint(tmp_path / f"{task}.pt", task)
    runner = YoloInferenceRunner(
        fixed_resolver({"tiny": ResolvedWeights(path, sha256_file(path))}), data_roots=[base]
    )
    settings = {"imgsz": 64, "conf": 0.1, "max_det": 4}
    ctx = RecordingContext().context(
        tmp_path / "job", [video], track="bytetrack", max_frames=12, **settings
    )
    entry = runner.run(ctx).detail["images"][0]

    ours = [[d["track_id"] for d in f["detections"]] for f in frames_of(tmp_path / "job", entry)]
    theirs = []
    for result in YOLO(str(path)).track(
        str(video), stream=True, tracker="bytetrack.yaml", verbose=False, **settings
    ):
        boxes = result.obb if task == "obb" else result.boxes
        theirs.append(boxes.id.int().tolist() if boxes.is_track else [])
        if len(theirs) == 12:
            break
    assert any(ours)
    assert ours == theirs
    assert entry["tracks"]["count"] == len({i for ids in theirs for i in ids})


def test_known_moving_objects_make_one_track_each(tmp_path: Path, base: Path) -> None:
    """Ground truth through the tracker: each object's true box, every frame."""
    import numpy as np
    import torch
    from ultralytics.engine.results import Results

    truth = make_video(tmp_path / "shapes.mp4", frames=45, objects=3)
    # two jobs' trackers side by side (two lanes): each numbers its own tracks
    trackers = [FrameTracker(kind, None, "detect", "cpu") for kind in ("bytetrack", "botsort")]
    blank = np.zeros((120, 160, 3), dtype=np.uint8)
    for frame, boxes in enumerate(truth):
        data = torch.tensor([[*box, 0.9, 0.0] for box in boxes])
        for tracker in trackers:
            tracked = tracker.update(Results(blank, "f", {0: "red"}, boxes=data), frame)
            assert sorted(tracked.boxes.id.int().tolist()) == [1, 2, 3]
    for tracker in trackers:
        summary = tracker.summary({0: "red"})
        assert summary.per_class == {"red": 3}
        assert [(t["first_frame"], t["last_frame"]) for t in summary.tracks] == [(0, 44)] * 3


def test_stride_window_and_max_frames_pick_the_frames(
    runner: YoloInferenceRunner, video: Path, tmp_path: Path
) -> None:
    recorder = RecordingContext()
    # 30 fps: the window [0.2 s, 1.0 s) is frames 6..29; every 4th: 6, 10, ..., 26; at most 5
    ctx = recorder.context(
        tmp_path / "job", [video], imgsz=64, vid_stride=4, start_s=0.2, end_s=1.0, max_frames=5
    )
    result = runner.run(ctx)

    entry = result.detail["images"][0]
    frames = frames_of(tmp_path / "job", entry)
    assert [f["frame"] for f in frames] == [6, 10, 14, 18, 22]
    assert [f["time_s"] for f in frames] == [0.2, 0.3333, 0.4667, 0.6, 0.7333]
    assert entry["video"] == {
        "fps": 30.0,
        "frame_count": FRAMES,
        "frames": 5,
        "first_frame": 6,
        "last_frame": 22,
        "vid_stride": 4,
    }
    assert recorder.progress[-1] == Progress(5, 5, "frames", {"frame_count": "declared"})
    assert result.summary["frames"] == 5
    InferenceResultDetail.model_validate(result.detail)


def test_a_job_mixes_images_and_videos_in_input_order(
    runner: YoloInferenceRunner, video: Path, tmp_path: Path
) -> None:
    images = make_images(tmp_path / "images", 2)
    broken = write_corrupt(tmp_path / "broken.jpg")
    recorder = RecordingContext()
    ctx = recorder.context(tmp_path / "job", [images[0], video, broken, images[1]], imgsz=64)

    result = runner.run(ctx)

    entries = result.detail["images"]
    assert [e["source"] for e in entries] == ["img0.jpg", "clip.mp4", "broken.jpg", "img1.jpg"]
    assert ["detections" in entries[0], "video" in entries[1], "error" in entries[2]] == [True] * 3
    assert len(frames_of(tmp_path / "job", entries[1])) == FRAMES
    assert recorder.progress[-1].done == recorder.progress[-1].total == FRAMES + 3
    assert (result.summary["videos"], result.summary["images"]) == (1, 4)
    InferenceResultDetail.model_validate(result.detail)


def test_the_annotated_video_reads_back_with_every_frame(
    runner: YoloInferenceRunner, video: Path, tmp_path: Path
) -> None:
    result = runner.run(
        RecordingContext().context(
            tmp_path / "job", [video], imgsz=64, vid_stride=2, save_annotated=True
        )
    )
    entry = result.detail["images"][0]
    assert entry["annotated_codec"] == "mp4v"
    assert frame_count(tmp_path / "job" / "artifacts" / entry["annotated"]) == FRAMES // 2


def test_cancel_mid_video_stops_between_frames_and_keeps_what_was_written(
    runner: YoloInferenceRunner, video: Path, tmp_path: Path
) -> None:
    recorder = RecordingContext(cancel_after=10)
    ctx = recorder.context(tmp_path / "job", [video], imgsz=64, save_annotated=True)

    with pytest.raises(JobCancelled, match=f"after 10 of {FRAMES} frames"):
        runner.run(ctx)

    artifacts = tmp_path / "job" / "artifacts"
    lines = (artifacts / "00000_clip.frames.jsonl").read_text().splitlines()
    assert [json.loads(line)["frame"] for line in lines] == list(range(10))
    assert frame_count(artifacts / "00000_clip.annotated.mp4") == 10


def test_a_rerun_after_an_interruption_starts_again_from_the_first_frame(
    runner: YoloInferenceRunner, video: Path, tmp_path: Path
) -> None:
    """What recovery's requeue does to a tracked video: the next attempt rewrites it whole."""
    params: dict[str, Any] = {"imgsz": 64, "conf": 0.1, "max_det": 5, "track": "bytetrack"}
    with pytest.raises(JobCancelled):
        runner.run(RecordingContext(cancel_after=7).context(tmp_path / "job", [video], **params))
    again = runner.run(RecordingContext().context(tmp_path / "job", [video], **params))
    fresh = runner.run(RecordingContext().context(tmp_path / "fresh", [video], **params))

    rerun = frames_of(tmp_path / "job", again.detail["images"][0])
    assert [frame["frame"] for frame in rerun] == list(range(FRAMES))
    assert rerun == frames_of(tmp_path / "fresh", fresh.detail["images"][0])
    assert again.detail == fresh.detail


def test_an_unreadable_video_fails_the_job_with_a_reason(
    runner: YoloInferenceRunner, tmp_path: Path
) -> None:
    fake = tmp_path / "fake.mp4"
    fake.write_bytes(b"not a video at all" * 100)
    with pytest.raises(InvalidJobInput, match=r"'fake.mp4': cannot read the file as a video"):
        runner.run(RecordingContext().context(tmp_path / "job", [fake], imgsz=64))


def test_memory_stays_bounded_over_a_long_video(
    runner: YoloInferenceRunner, tmp_path: Path
) -> None:
    """RSS after frame 200 and at the end of 1200 frames: every frame held would be 1000 frames
    of pixels (57 MB) and their results; what the job keeps per frame is a line on disk."""
    import psutil

    long_video = tmp_path / "long.mp4"
    make_video(long_video, frames=1200, objects=2)
    process = psutil.Process()
    rss: dict[int, int] = {}

    class Measuring(RecordingContext):
        def report(self, progress: Any) -> None:
            if progress.done in (200, 1200):
                rss[progress.done] = process.memory_info().rss

    runner.run(Measuring().context(tmp_path / "job", [long_video], imgsz=32, max_det=5))

    assert rss[1200] - rss[200] < 24 << 20


def test_tracker_settings_are_the_keys_of_ultralytics_tracker_yamls() -> None:
    keys = {
        kind: set(tracker_config(kind, None)) - {"tracker_type", "model"}
        for kind in ("bytetrack", "botsort")
    }
    assert set(TrackerSettings.model_fields) == keys["botsort"]
    assert set(BOTSORT_SETTINGS) == keys["botsort"] - keys["bytetrack"]
    overridden = tracker_config("botsort", TrackerSettings(track_buffer=5, gmc_method="none"))
    assert (overridden["track_buffer"], overridden["gmc_method"]) == (5, "none")


def test_the_trackers_never_pip_install_lap() -> None:
    import lap
    from ultralytics.trackers.utils import matching

    assert matching.lap is lap
