"""Multi-object tracking over a video's frames with ultralytics' own trackers (ByteTrack, BoT-SORT).

The tracker is fed exactly as ultralytics' `track` mode feeds it (`trackers/track.py`,
`on_predict_postprocess_end`): each frame's boxes (or rotated boxes), in frame order, one tracker
per video; what it returns replaces the frame's detections, each with its track id. One
difference, so that every detection carries a `track_id`: a frame on which the tracker confirms
no track has no detections (ultralytics then keeps the frame's untracked boxes, without ids).

Predictions are made in batches of frames before the tracker sees them one by one, which changes
nothing the tracker sees: frames of one video have one shape, and ultralytics letterboxes such a
batch as it does each frame alone.

The tracker's settings are its shipped yaml (`ultralytics/cfg/trackers/{name}.yaml`) with the
job's overrides (`params.tracker`), each of which must be a key of that yaml.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from yolo_orch.domain import JsonObject
from yolo_orch.params.inference import TrackerSettings, TrackerType

if TYPE_CHECKING:
    from ultralytics.engine.results import Results

__all__ = ["FrameTracker", "TrackSummary", "tracker_config"]


def tracker_config(kind: TrackerType, settings: TrackerSettings | None) -> dict[str, Any]:
    """The tracker's shipped settings with the job's overrides. Its `check_requirements` for
    `lap` never runs: `lap` is a dependency of the `yolo` extra, imported here first."""
    import lap  # noqa: F401  # a missing lap would make ultralytics pip-install it
    import yaml
    from ultralytics.utils import ROOT

    shipped = (ROOT / "cfg" / "trackers" / f"{kind}.yaml").read_text(encoding="utf-8")
    config: dict[str, Any] = dict(yaml.safe_load(shipped))
    overrides = settings.overrides() if settings is not None else {}
    unknown = sorted(set(overrides) - set(config))
    if unknown:  # the params' definition and the installed ultralytics disagree
        raise RuntimeError(f"ultralytics' {kind}.yaml has no {', '.join(unknown)}")
    return {**config, **overrides}


@dataclass
class _Span:
    class_id: int
    first_frame: int
    last_frame: int
    frames: int = 1


class FrameTracker:
    """One video's tracker, and what it has seen of each track."""

    def __init__(
        self,
        kind: TrackerType,
        settings: TrackerSettings | None,
        task: str,
        device: str,
        *,
        spans: bool = True,
    ) -> None:
        """`spans`: keep what each track was seen as, for `summary` (a video's); a live
        stream, whose tracks never stop coming, keeps none."""
        from ultralytics.trackers.track import TRACKER_MAP
        from ultralytics.utils import IterableSimpleNamespace

        config = IterableSimpleNamespace(**tracker_config(kind, settings))
        config.device = device  # as ultralytics sets it (for a ReID encoder, which is off)
        self._tracker: Any = TRACKER_MAP[config.tracker_type](args=config)
        self._obb = task == "obb"
        self._spans: dict[int, _Span] = {}
        self._keeps_spans = spans

    def update(self, result: Results, frame: int) -> Results:
        """The frame's result with its detections replaced by the tracked ones."""
        import torch

        source: Any = result.obb if self._obb else result.boxes
        if source is None:
            raise RuntimeError("tracking needs results with boxes")
        tracks = self._tracker.update(source.cpu().numpy(), result.orig_img)
        if len(tracks) == 0:
            empty: Results = result[:0]
            return empty
        tracked: Results = result[tracks[:, -1].astype(int)]
        data = torch.as_tensor(tracks[:, :-1], device=source.data.device)
        tracked.update(**{"obb" if self._obb else "boxes": data})
        if self._keeps_spans:
            self._note(tracks, frame)
        return tracked

    def _note(self, tracks: Any, frame: int) -> None:
        # a row: box (4 values, or 5 for obb), track id, score, class, detection index
        id_column = 5 if self._obb else 4
        for row in tracks.tolist():
            track_id, class_id = int(row[id_column]), int(row[-2])
            span = self._spans.get(track_id)
            if span is None:
                self._spans[track_id] = _Span(class_id, frame, frame)
            else:
                span.last_frame = frame
                span.frames += 1

    def summary(self, names: dict[int, str]) -> TrackSummary:
        """Distinct tracks per class name (a track's class is the one it was first seen with),
        and each track's first and last frame, in order of track id."""
        per_class: dict[str, int] = {}
        tracks: list[JsonObject] = []
        for track_id, span in sorted(self._spans.items()):
            name = names.get(span.class_id, str(span.class_id))
            per_class[name] = per_class.get(name, 0) + 1
            tracks.append(
                {
                    "track_id": track_id,
                    "class_id": span.class_id,
                    "class_name": name,
                    "first_frame": span.first_frame,
                    "last_frame": span.last_frame,
                    "frames": span.frames,
                }
            )
        return TrackSummary(per_class, tracks)


@dataclass(frozen=True)
class TrackSummary:
    per_class: dict[str, int]
    tracks: list[JsonObject]

    def as_json(self) -> JsonObject:
        return {
            "count": len(self.tracks),
            "per_class": dict(self.per_class),
            "tracks": list(self.tracks),
        }
