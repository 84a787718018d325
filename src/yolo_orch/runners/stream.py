"""Stream jobs: each source read on its own thread (`stream_capture`), the frames of every stream
of one model and forward-pass params on a lane put through shared forward passes
(`stream_hub`), and what each frame comes to written as it comes: a line of the job's JSON Lines
segments (`files.stream_segments`), a `frame` event at most `events_max_hz` times a second
(`FrameFeed`), the zone and line counts (`stream_counts`), and now and then the annotated
snapshot. The job's progress carries its health and counters.

The runner's own thread only watches: it reports progress, and ends the stream when it is
cancelled, reaches its `end_s` or `max_frames`, loses a source for good, or its model fails."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from yolo_orch.domain import JobResult, JsonObject, Progress
from yolo_orch.domain.aliases import parse_alias_ref
from yolo_orch.domain.specs import StreamSpec
from yolo_orch.domain.streams import StreamHealth
from yolo_orch.errors import JobCancelled, SourceLost
from yolo_orch.files.jobfiles import write_atomic
from yolo_orch.files.stream_segments import SNAPSHOT_FILE, SegmentWriter
from yolo_orch.ops.frame_feed import FrameFeed
from yolo_orch.ops.logs import for_job
from yolo_orch.params.stream import StreamParams, shared_pass_key
from yolo_orch.runners.base import RunContext
from yolo_orch.runners.dataset_capture import CaptureWriter, JobCapture, job_capture
from yolo_orch.runners.stream_capture import (
    STOP_WITHIN_S,
    Capture,
    Frame,
    VideoSource,
    open_video,
)
from yolo_orch.runners.stream_counts import Counts, Line, Seen, Zone
from yolo_orch.runners.stream_hub import Follower, LoadModel, StreamHubs, StreamModel
from yolo_orch.runners.stream_stats import SourceStats, latency_percentiles
from yolo_orch.runners.stream_switch import AliasWatch, Switchboard

if TYPE_CHECKING:
    from yolo_orch.runners.stream_capture import Pixels

log = logging.getLogger(__name__)

PROGRESS_EVERY_S = 1.0

LoadStreamModel = Callable[[str, RunContext, StreamParams], LoadModel]
"""How to load a lane's model for a stream job (`device`, the job's context, its params):
called in the job's worker thread (which may ask the server's loop), the load it returns is
entered in the hub's thread."""


def one_frame_a_pass(lane: str) -> int:
    return 1


@dataclass(frozen=True)
class StreamOutputs:
    """What streams get from the server: where their frames are published, how their
    segments roll, and how many frames a lane's pass may hold (`batch_max_images`)."""

    feed: FrameFeed = field(default_factory=FrameFeed)
    segment_s: float = 60.0
    segments_kept: int = 60
    max_batch: Callable[[str], int] = one_frame_a_pass
    aliases: AliasWatch = field(default_factory=AliasWatch)
    """Where the server tells running streams of alias moves (they switch model)."""


class StreamRunner:
    def __init__(
        self,
        load: LoadStreamModel,
        outputs: StreamOutputs,
        *,
        hubs: StreamHubs | None = None,
        open_source: Callable[[str], VideoSource] = open_video,
        dataset_capture: CaptureWriter | None = None,
    ) -> None:
        """`hubs`: shared with the inference runner, whose jobs then join the streams'
        passes. `dataset_capture`: where the frames `params.capture` selects are written."""
        self._load = load
        self._dataset_capture = dataset_capture
        self._outputs = outputs
        self._open_source = open_source
        self.hubs = hubs or StreamHubs(outputs.max_batch)
        """The lanes' hubs; `hubs.batches`: the passes streams shared."""

    def run(self, ctx: RunContext) -> JobResult:
        params = StreamParams.from_job(ctx.job.params)
        spec = ctx.job.spec_as(StreamSpec)
        device = ctx.devices[0]
        segments = SegmentWriter(ctx.workdir, self._outputs.segment_s, self._outputs.segments_kept)
        into_dataset = job_capture(self._dataset_capture, ctx.job, params.capture)
        session = _Session(ctx, params, segments, self._outputs.feed, into_dataset)
        board = Switchboard(session, ctx.job.model_id)
        load = self._load(device, ctx, params)
        board.active.hub = self.hubs.join(device, shared_pass_key(ctx.job), board.active, load)
        alias = parse_alias_ref(ctx.job.model)
        unfollow = None if alias is None else self._outputs.aliases.follow(str(alias), board.want)
        captures = [
            Capture(
                index,
                source.url,
                source.name,
                max_fps=params.max_fps,
                give_up_s=params.reconnect_give_up_s,
                on_frame=board.frame_ready,
                open_source=self._open_source,
            )
            for index, source in enumerate(spec.sources)
        ]
        session.captures = captures
        log.info(
            "stream %s reads %d source(s) on %s",
            ctx.job.id,
            len(captures),
            device,
            extra=for_job(ctx.job.id),
        )
        for capture in captures:
            capture.start()
        try:
            self._watch(ctx, params, session, board)
        finally:
            if unfollow is not None:
                unfollow()
            for seat in (board.active, board.pending):
                if seat is not None and seat.hub is not None:
                    self.hubs.leave(seat.hub, seat)
            for capture in captures:
                capture.stop()
            for capture in captures:  # each releases its source: none is left mid-read
                capture.join(STOP_WITHIN_S)
            session.close()
            self._outputs.feed.forget(ctx.job.id)
        return JobResult(summary=session.summary(), detail=session.detail(segments.names))

    def _watch(
        self, ctx: RunContext, params: StreamParams, session: _Session, board: Switchboard
    ) -> None:
        started = time.monotonic()
        while True:
            session.changed.wait(PROGRESS_EVERY_S)
            session.changed.clear()
            self._switch(ctx, params, session, board)
            ctx.report_progress(session.progress())
            if session.error is not None:
                raise session.error
            if ctx.should_cancel():
                raise JobCancelled(f"cancelled after {session.frames} frames")
            lost = [c.shown for c in session.captures if c.health is StreamHealth.SOURCE_LOST]
            if lost:
                raise SourceLost(
                    f"{', '.join(lost)} could not be read again within "
                    f"{params.reconnect_give_up_s:g} s"
                )
            if params.end_s is not None and time.monotonic() - started >= params.end_s:
                return
            if params.max_frames is not None and session.frames >= params.max_frames:
                return

    def _switch(
        self, ctx: RunContext, params: StreamParams, session: _Session, board: Switchboard
    ) -> None:
        """Finish the switches the hubs made, and start the one an alias move asked for."""
        for old, new in board.handed_over():
            if old.hub is not None:
                self.hubs.leave(old.hub, old)
            session.model_id = new.model_id
            if new.model_id is not None:
                ctx.switch_model(new.model_id)
            log.info(
                "stream %s runs model %s from frame %d on",
                ctx.job.id,
                new.model_id,
                session.frames + 1,
                extra=for_job(ctx.job.id),
            )
        for seat, error in board.refused():
            if seat.hub is not None:
                self.hubs.leave(seat.hub, seat)
            log.error(
                "stream %s keeps model %s: model %s could not be loaded: %s",
                ctx.job.id,
                board.active.model_id,
                seat.model_id,
                error,
                extra=for_job(ctx.job.id),
            )
        model_id = board.next_model()
        if model_id is None:
            return
        job = replace(ctx.job, model_id=model_id)
        try:  # resolving the model may ask the server: in this thread, never a hub's
            load = self._load(ctx.devices[0], replace(ctx, job=job), params)
        except Exception as error:
            log.error(
                "stream %s keeps model %s: model %s: %s",
                ctx.job.id,
                board.active.model_id,
                model_id,
                error,
                extra=for_job(ctx.job.id),
            )
            return
        seat = board.seat(model_id)
        seat.hub = self.hubs.join(ctx.devices[0], shared_pass_key(job), seat, load)


class _Session:
    """One stream job as its hub sees it (`stream_hub.Attendee`): `processed` runs in the hub's
    thread, the rest in the runner's."""

    def __init__(
        self,
        ctx: RunContext,
        params: StreamParams,
        segments: SegmentWriter,
        feed: FrameFeed,
        into_dataset: JobCapture | None = None,
    ) -> None:
        self.job_id = ctx.job.id
        self._ctx = ctx
        self._params = params
        self._segments = segments
        self._feed = feed
        self._into_dataset = into_dataset
        self.captures: list[Capture] = []
        self._followers: dict[int, Follower] = {}
        self._zones = [Zone(zone.name, tuple(map(_xy, zone.points))) for zone in params.zones]
        self._lines = [Line(line.name, _xy(line.start), _xy(line.end)) for line in params.lines]
        self._counts: dict[int, Counts] = {}
        self._stats: dict[int, SourceStats] = {}
        self._event_every = 1.0 / params.events_max_hz
        self._next_event = 0.0
        self._next_snapshot = 0.0
        self.frames = 0
        self.shared_frames = 0
        """Frames that went through a forward pass with other streams' frames."""
        self._writing = threading.Lock()
        self._closed = False
        self.changed = threading.Event()
        self.error: Exception | None = None
        self.model_id = ctx.job.model_id
        """The registry model its frames go through now."""

    def _new_counts(self) -> Counts:
        return Counts(self._zones, self._lines)

    def take_frames(self) -> list[Frame]:
        return [frame for capture in self.captures if (frame := capture.take()) is not None]

    def close(self) -> None:
        """No frame is written after this (the hub may be in a pass that holds one)."""
        with self._writing:
            self._closed = True
            self._segments.close()

    def write(
        self, frame: Frame, result: object, model: StreamModel, shared: bool, model_id: str | None
    ) -> None:
        """`model_id`: the registry model `model` is (None for a runtime's own)."""
        with self._writing:
            if not self._closed:
                self._process(frame, result, model, shared, model_id)

    def _process(
        self, frame: Frame, result: object, model: StreamModel, shared: bool, model_id: str | None
    ) -> None:
        follower = self._followers.get(frame.source)
        if follower is None:
            follower = self._followers[frame.source] = model.follower(self._params)
        detections = follower.detections(result, frame)
        height, width = frame.pixels.shape[:2]
        counts = self._counts.get(frame.source)
        if counts is None:  # its first frame (setdefault would build Counts every frame)
            counts = self._counts[frame.source] = self._new_counts()
        seen = [_seen(found, width, height) for found in detections]
        events = counts.update([place for place in seen if place is not None])
        now = time.monotonic()
        latency_ms = (now - frame.captured) * 1000
        entry = self._segments.write(
            {
                "source": frame.source,
                "frame": frame.number,
                "captured_at": round(frame.captured_at, 3),
                "latency_ms": round(latency_ms, 1),
                "width": int(width),
                "height": int(height),
                "detections": detections,
                "events": events,
                "model_id": model_id,
            }
        )
        stats = self._stats.get(frame.source)
        if stats is None:
            stats = self._stats[frame.source] = SourceStats()
        stats.processed(now, latency_ms)
        if self._into_dataset is not None:
            self._into_dataset.offer(entry, frame.pixels, stats.count)
        self.frames += 1
        self.shared_frames += shared
        if now >= self._next_event:
            self._next_event = now + self._event_every
            self._feed.publish(self.job_id, entry)
        every = self._params.snapshot_every_s
        if every and now >= self._next_snapshot:
            self._next_snapshot = now + every
            self._snapshot(follower.annotated(result, frame))
        if self._params.max_frames is not None and self.frames >= self._params.max_frames:
            self.changed.set()

    def _snapshot(self, image: Pixels) -> None:
        import cv2

        ok, jpeg = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 80])
        if ok:
            write_atomic(self._ctx.workdir / SNAPSHOT_FILE, jpeg.tobytes(), durable=False)

    def failed(self, error: Exception) -> None:
        self.error = error
        self.changed.set()

    def _sources(self) -> list[JsonObject]:
        now = time.monotonic()
        sources = []
        for capture in self.captures:
            stats = self._stats.get(capture.index) or SourceStats()
            sources.append(
                {
                    "source": capture.shown,
                    "health": str(capture.health),
                    "frames_read": capture.frames_read,
                    "frames_processed": stats.count,
                    "frames_dropped": capture.frames_dropped,
                    "reconnects": capture.reconnects,
                    "fps_in": round(capture.fps_in(now), 2),
                    "fps_out": round(stats.fps(now), 2),
                }
            )
        return sources

    def _counts_shown(self) -> list[JsonObject]:
        return [
            {"source": capture.shown, **self._counts.get(index, self._new_counts()).snapshot()}
            for index, capture in enumerate(self.captures)
        ]

    def progress(self) -> Progress:
        sources = self._sources()
        worst = max((StreamHealth(s["health"]) for s in sources), key=_HEALTH_ORDER.index)
        latencies = [stats.latencies() for stats in self._stats.values()]
        detail: JsonObject = {
            "health": str(worst),
            "fps_in": round(sum(s["fps_in"] for s in sources), 2),
            "fps_out": round(sum(s["fps_out"] for s in sources), 2),
            "latency_ms": latency_percentiles([ms for part in latencies for ms in part]),
            "shared_frames": self.shared_frames,
            "model_id": self.model_id,
            "sources": sources,
            "counts": self._counts_shown(),
        }
        return Progress(self.frames, self._params.max_frames or 0, "frames", detail)

    def summary(self) -> JsonObject:
        sources = self._sources()
        summary: JsonObject = {
            "frames": self.frames,
            "frames_dropped": sum(s["frames_dropped"] for s in sources),
            "reconnects": sum(s["reconnects"] for s in sources),
            "counts": self._counts_shown(),
        }
        if self._into_dataset is not None:
            summary["capture"] = self._into_dataset.summary()
        return summary

    def detail(self, segments: list[str]) -> JsonObject:
        return {
            "frames": self.frames,
            "sources": self._sources(),
            "counts": self._counts_shown(),
            "segments": segments,
        }


_HEALTH_ORDER = [
    StreamHealth.LIVE,
    StreamHealth.CONNECTING,
    StreamHealth.RECONNECTING,
    StreamHealth.SOURCE_LOST,
]


def _xy(point: list[float]) -> tuple[float, float]:
    return point[0], point[1]


def _seen(detection: JsonObject, width: int, height: int) -> Seen | None:
    """Where a detection is, for the counts: its box's centre, 0..1 of the frame (None for a
    class, which has no place)."""
    if isinstance(box := detection.get("box"), dict):
        x, y = (box["x1"] + box["x2"]) / 2, (box["y1"] + box["y2"]) / 2
    elif isinstance(rotated := detection.get("obb"), dict):
        x, y = rotated["cx"], rotated["cy"]
    else:
        return None
    track = detection.get("track_id")
    tracked = track if isinstance(track, int) else None
    return Seen(tracked, str(detection["class_name"]), x / max(width, 1), y / max(height, 1))
