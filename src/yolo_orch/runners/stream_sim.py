"""The simulated runtime's stream model: it finds one "person" crossing each frame from left to
right every `SIM_LAP_S` seconds (a new track each lap, with `track`), so that streams, zones,
lines and their counts can be tested on real sources without weights."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from yolo_orch.domain import JsonObject
from yolo_orch.params.stream import StreamParams

if TYPE_CHECKING:
    from yolo_orch.runners.stream_capture import Frame, Pixels
    from yolo_orch.runners.stream_hub import Follower

SIM_LAP_S = 4.0
"""Seconds the simulated person takes to cross the frame."""
SIM_PASS_S = 0.02
"""What a pass takes unless `params.sim_seconds` says (as a small model's on a GPU would):
frames that come meanwhile wait for the next pass, which they then share."""


class SimStreamModel:
    def __init__(self, pass_s: float = SIM_PASS_S) -> None:
        self._pass_s = pass_s
        self._laps_before = int(time.time() // SIM_LAP_S)
        """Laps are numbered from the model's load: the first person is track 1."""

    def predict(self, frames: Sequence[Pixels]) -> list[object]:
        time.sleep(self._pass_s)
        lap, into = divmod(time.time(), SIM_LAP_S)
        lap -= self._laps_before
        return [{"lap": int(lap), "x": into / SIM_LAP_S} for _ in frames]

    def follower(self, params: StreamParams) -> Follower:
        return _SimFollower(tracked=params.track is not None)


class _SimFollower:
    def __init__(self, tracked: bool) -> None:
        self._tracked = tracked

    def detections(self, result: object, frame: Frame) -> list[JsonObject]:
        if not isinstance(result, dict):
            raise TypeError(f"a simulated stream model returned a {type(result).__name__}")
        height, width = frame.pixels.shape[:2]
        x = float(result["x"]) * width
        detection: JsonObject = {
            "class_id": 0,
            "class_name": "person",
            "confidence": 0.9,
            "box": {"x1": x - 10, "y1": height * 0.4, "x2": x + 10, "y2": height * 0.6},
        }
        if self._tracked:
            detection["track_id"] = int(result["lap"]) + 1
        return [detection]

    def annotated(self, result: object, frame: Frame) -> Pixels:
        import cv2

        image = frame.pixels.copy()
        for detection in self.detections(result, frame):
            box = detection["box"]
            corner = (int(box["x1"]), int(box["y1"]))
            cv2.rectangle(image, corner, (int(box["x2"]), int(box["y2"])), (0, 255, 0), 2)
        return image
