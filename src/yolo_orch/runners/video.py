"""Inference jobs with video inputs (and images beside them): each video's frames in batches
through the job's model, optionally tracked, each frame's entry streamed to a JSON Lines artifact.

- Frames: the time window (`start_s`, `end_s`), every `vid_stride`th frame of it starting with
  its first, at most `max_frames`. Frames of one video go through the model `batch_size(imgsz)`
  at a time (one streaming predict, one forward pass), then, in order, through the tracker.
- Results at any length: each frame's entry (`frame`, `time_s` and the task's fields) is appended
  to `artifacts/{index:05d}_{stem}.frames.jsonl` (a long stem cut to fit in a file name:
  `artifact_names`) as it is made, with a byte index beside it
  (`resultfile.EntryLog`), and flushed after each batch: no frame is held once it is written. The
  job's result holds, per video, one entry: its summary and the artifact's name.
- Progress counts frames (an image counts as one) against what the containers declare, and says
  whether that total is `declared` or `estimated` (`progress.detail.frame_count`).
- Cancel is checked after every frame; what was written stays (the JSON Lines artifact, and the
  annotated video up to that frame, playable).
- After a crash the job is requeued and runs again from the first frame, with or without
  tracking: every attempt rewrites its artifacts from the start, so track ids and frame entries
  are those of one uninterrupted run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, replace
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

from yolo_orch.domain import JobResult, JsonObject, Progress
from yolo_orch.errors import InvalidJobInput, JobCancelled
from yolo_orch.files.inputs import open_contained, opened_name
from yolo_orch.files.jobfiles import FRAMES_SUFFIX
from yolo_orch.files.resultfile import EntryLog
from yolo_orch.files.videos import FrameWindow, VideoInfo, is_video, read_frames, video_info
from yolo_orch.params.inference import BOX_TASKS, InferenceParams
from yolo_orch.runners.artifact_names import artifact_name, input_stem
from yolo_orch.runners.base import RunContext
from yolo_orch.runners.decode import InputFile, batch_size
from yolo_orch.runners.encode import Encoding, ImageOutput, counted, encode
from yolo_orch.runners.predict import predict_batch
from yolo_orch.runners.tracking import FrameTracker

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
    from ultralytics.engine.results import Results
    from ultralytics.models import YOLO

    from yolo_orch.runners.decode import Decoded

__all__ = ["ANNOTATED_CODEC", "has_videos", "run_media"]

ANNOTATED_CODEC = "mp4v"
"""The annotated videos' codec: MPEG-4 Part 2. The OpenCV wheel here has FFmpeg's mpeg4 encoder
but no H.264 one (`avc1` fails to open a writer), so browsers may not play them inline."""

RunImages = Callable[[RunContext, list[InputFile]], JobResult]
"""The runner's own image path, for a job's image inputs."""


def has_videos(sources: list[InputFile]) -> bool:
    return any(is_video(source.path) for source in sources)


class _FrameProgress:
    """Frames done against the frames planned: what the containers declare, corrected as each
    video ends; never less than what is done (a container that declares nothing)."""

    def __init__(self, ctx: RunContext, planned: int, estimated: bool) -> None:
        self._ctx = ctx
        self._planned = planned
        self.done = 0
        self._detail: JsonObject = {"frame_count": "estimated" if estimated else "declared"}

    @property
    def total(self) -> int:
        return max(self._planned, self.done)

    def at(self, done: int) -> None:
        self.done = done
        self._ctx.report_progress(Progress(done, self.total, "frames", self._detail))

    def settle(self, planned: int | None, ran: int) -> None:
        """A video ended: count the frames it had, not those its container promised."""
        self._planned += ran - (planned or 0)
        self.at(self.done)


def run_media(
    ctx: RunContext,
    model: YOLO,
    device: str,
    params: InferenceParams,
    encoding: Encoding,
    sources: list[InputFile],
    *,
    run_images: RunImages,
    roots: list[Path],
    max_pixels: int,
) -> JobResult:
    """A job with at least one video: its images first (through `run_images`), then each video.
    A video that cannot be read fails the job (`invalid_input`) before any frame runs."""
    videos = {i: source for i, source in enumerate(sources) if is_video(source.path)}
    infos = {i: _checked_info(source, roots, max_pixels) for i, source in videos.items()}
    images = [source for i, source in enumerate(sources) if i not in videos]
    planned = {i: _window(params, info.fps).planned(info.frame_count) for i, info in infos.items()}
    estimated = any(info.frame_count is None for info in infos.values())
    progress = _FrameProgress(
        ctx, len(images) + sum(count or 0 for count in planned.values()), estimated
    )
    progress.at(0)
    entries: list[JsonObject | None] = [None] * len(sources)
    if images:
        counted_ctx = replace(ctx, report_progress=lambda p: progress.at(p.done))
        image_entries = run_images(counted_ctx, images).detail["images"]
        if not isinstance(image_entries, list):
            raise TypeError("the image runner's result has no images")
        image_indices = [i for i in range(len(sources)) if i not in videos]
        for i, entry in zip(image_indices, image_entries, strict=True):
            entries[i] = entry if isinstance(entry, dict) else None
    videos_run: list[_VideoOutcome] = []
    for i, source in videos.items():
        outcome = _VideoRun(ctx, model, device, params, encoding, progress).run(
            i, source, infos[i], roots
        )
        progress.settle(planned[i], outcome.frames)
        entries[i] = outcome.entry
        videos_run.append(outcome)
    image_entries = [e for i, e in enumerate(entries) if i not in videos and e is not None]
    return JobResult(
        summary=_summary(encoding.task, image_entries, videos_run),
        detail={"images": [entry for entry in entries if entry is not None]},
    )


@dataclass(frozen=True)
class _VideoOutcome:
    entry: JsonObject
    frames: int
    detections: int
    tracks_per_class: dict[str, int] | None


def _summary(task: str, images: list[JsonObject], videos: list[_VideoOutcome]) -> JsonObject:
    summary: JsonObject = {
        "task": task,
        "images": len(images) + len(videos),
        **counted(task, images),
        "failed_images": sum(1 for image in images if "error" in image),
        "videos": len(videos),
        "frames": sum(video.frames for video in videos),
    }
    image_detections = summary.get("detections")
    if task in BOX_TASKS and isinstance(image_detections, int):
        summary["detections"] = image_detections + sum(video.detections for video in videos)
    tracked = [video.tracks_per_class for video in videos if video.tracks_per_class is not None]
    if tracked:
        per_class: dict[str, int] = {}
        for tracks in tracked:
            for name, count in tracks.items():
                per_class[name] = per_class.get(name, 0) + count
        summary["tracks_per_class"] = dict(per_class)
    return summary


def _window(params: InferenceParams, fps: float) -> FrameWindow:
    return FrameWindow.of(
        fps,
        start_s=params.start_s,
        end_s=params.end_s,
        stride=params.vid_stride,
        max_frames=params.max_frames,
    )


def _checked_info(source: InputFile, roots: list[Path], max_pixels: int) -> VideoInfo:
    import cv2

    with open_contained(source.path, roots) as file:
        capture = cv2.VideoCapture(opened_name(file, source.path))
        try:
            info = video_info(capture)
        finally:
            capture.release()
    if isinstance(info, str):
        raise InvalidJobInput(f"input {source.name!r}: {info}")
    if info.width * info.height > max_pixels:
        raise InvalidJobInput(
            f"input {source.name!r}: its frames have {info.width * info.height} pixels; this "
            f"server decodes at most {max_pixels} (max_image_pixels)"
        )
    return info


class _VideoRun:
    def __init__(
        self,
        ctx: RunContext,
        model: YOLO,
        device: str,
        params: InferenceParams,
        encoding: Encoding,
        progress: _FrameProgress,
    ) -> None:
        self._ctx = ctx
        self._model = model
        self._device = device
        self._params = params
        self._encoding = encoding
        self._progress = progress

    def run(
        self, index: int, source: InputFile, info: VideoInfo, roots: list[Path]
    ) -> _VideoOutcome:
        import cv2

        artifacts = self._ctx.workdir / "artifacts"
        stem = input_stem(source.name)
        frames_name = artifact_name(index, stem, FRAMES_SUFFIX)
        params = self._params
        tracker = (
            FrameTracker(params.track, params.tracker, self._encoding.task, self._device)
            if params.track is not None
            else None
        )
        annotated = (
            _AnnotatedVideo(
                artifacts, artifact_name(index, stem, ".annotated.mp4"), info, params.vid_stride
            )
            if params.save_annotated
            else None
        )
        log = EntryLog(artifacts / frames_name, artifacts / f".{frames_name}.index")
        span = _Span()
        try:
            with open_contained(source.path, roots) as file:
                capture = cv2.VideoCapture(opened_name(file, source.path))
                try:
                    frames = read_frames(capture, _window(params, info.fps))
                    outputs = _FrameOutputs(artifacts, index, stem, info.fps, annotated)
                    self._run_frames(frames, outputs, tracker, log, span)
                finally:
                    capture.release()
        finally:
            log.close()
            if annotated is not None:
                annotated.close()
        entry: JsonObject = {
            "source": source.name,
            "width": info.width,
            "height": info.height,
            "video": {
                "fps": round(info.fps, 4),
                "frame_count": info.frame_count,
                "frames": log.count,
                "first_frame": span.first,
                "last_frame": span.last,
                "vid_stride": params.vid_stride,
            },
            "frames": frames_name,
        }
        if self._encoding.task in BOX_TASKS:
            entry["detections_total"] = span.detections
        per_class = None
        if tracker is not None:
            tracks = tracker.summary(self._model.names)
            entry["tracks"] = tracks.as_json()
            per_class = tracks.per_class
        if annotated is not None:
            entry["annotated"] = annotated.name
            entry["annotated_codec"] = ANNOTATED_CODEC
        return _VideoOutcome(entry, log.count, span.detections, per_class)

    def _run_frames(
        self,
        frames: Iterator[Decoded],
        outputs: _FrameOutputs,
        tracker: FrameTracker | None,
        log: EntryLog,
        span: _Span,
    ) -> None:
        """Each frame through the model (a batch at a time) and the tracker, into the log; the
        log is flushed after each batch, and cancel checked after each frame."""
        params = self._params
        size = batch_size(params.imgsz)
        while batch := list(islice(frames, size)):
            with closing(predict_batch(self._model, batch, self._device, params)) as results:
                for (frame, _), predicted in results:
                    result = tracker.update(predicted, frame) if tracker is not None else predicted
                    entry = outputs.entry(frame, result, self._encoding)
                    log.append(entry)
                    span.add(frame, len(entry.get("detections") or ()))
                    self._progress.at(self._progress.done + 1)
                    if self._ctx.should_cancel():
                        log.flush()
                        raise JobCancelled(
                            f"cancelled after {self._progress.done} of {self._progress.total} "
                            "frames"
                        )
            log.flush()


@dataclass
class _Span:
    """The frames a video's run took, and its detections."""

    first: int | None = None
    last: int | None = None
    detections: int = 0

    def add(self, frame: int, detections: int) -> None:
        self.first = frame if self.first is None else self.first
        self.last = frame
        self.detections += detections


@dataclass(frozen=True)
class _FrameOutputs:
    """Where a video's frames go besides the log: per-frame artifacts (class and depth maps),
    named after the input and the frame, and the annotated video."""

    artifacts: Path
    index: int
    stem: str
    fps: float
    annotated: _AnnotatedVideo | None

    def entry(self, frame: int, result: Results, encoding: Encoding) -> JsonObject:
        output = ImageOutput(self.artifacts, self.index, self.stem, f"_f{frame:06d}")
        entry: JsonObject = {
            "frame": frame,
            "time_s": round(frame / self.fps, 4),
            **encode(result, encoding, output),
        }
        if self.annotated is not None:
            self.annotated.write(result.plot())
        return entry


class _AnnotatedVideo:
    """An mp4 of the annotated frames, at the rate they were taken, written to a hidden name and
    renamed into place when closed (also after a cancel: it then ends at the last frame run)."""

    def __init__(self, folder: Path, name: str, info: VideoInfo, stride: int) -> None:
        import cv2

        folder.mkdir(parents=True, exist_ok=True)
        self.name = name
        self._path = folder / name
        self._tmp = folder / f".{name}"  # the suffix tells FFmpeg the container
        fourcc = cv2.VideoWriter.fourcc(*ANNOTATED_CODEC)
        self._writer = cv2.VideoWriter(
            str(self._tmp), fourcc, info.fps / stride, (info.width, info.height)
        )
        if not self._writer.isOpened():
            raise RuntimeError(f"OpenCV cannot write {ANNOTATED_CODEC} video here")

    def write(self, image: NDArray[np.uint8]) -> None:
        self._writer.write(image)

    def close(self) -> None:
        self._writer.release()
        os.replace(self._tmp, self._path)
