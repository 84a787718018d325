"""A stream's results on disk: rolling JSON Lines segments under its job's folder, one frame a
line, each with `seq` (the job's frame sequence, which survives restarts). A segment is named
by the `seq` of its first frame, so a reader finds where `since` starts from the names alone;
the writer keeps the newest `kept` segments and deletes the older ones as it rolls."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

SEGMENTS_DIR = "segments"
SNAPSHOT_FILE = "snapshot.jpg"
_PREFIX, _SUFFIX = "frames-", ".jsonl"


def segment_paths(workdir: Path) -> list[Path]:
    """The job's segments, oldest first."""
    folder = workdir / SEGMENTS_DIR
    try:
        names = [name for name in os.listdir(folder) if _first_seq(name) is not None]
    except FileNotFoundError:
        return []
    return [folder / name for name in sorted(names)]


def _first_seq(name: str) -> int | None:
    digits = name.removeprefix(_PREFIX).removesuffix(_SUFFIX)
    if not (name.startswith(_PREFIX) and name.endswith(_SUFFIX) and digits.isascii()):
        return None
    return int(digits) if digits.isdigit() else None


def last_seq(workdir: Path) -> int:
    """The `seq` of the newest frame written (0: none), read from the newest segment's last
    whole line: a run that resumes numbers on from it."""
    for path in reversed(segment_paths(workdir)):
        last = 0
        with path.open("rb") as lines:
            for line in lines:
                if line.endswith(b"\n"):
                    try:
                        last = int(json.loads(line)["seq"])
                    except (ValueError, KeyError, TypeError):
                        continue
        if last:
            return last
    return 0


class SegmentWriter:
    """Appends frames to the current segment; a new one starts every `segment_s` seconds.
    Lines are flushed as written (a reader sees them at once) but not fsynced: a frame is a
    sample of a live source, and a crash costs the last moments of it at most."""

    def __init__(
        self,
        workdir: Path,
        segment_s: float,
        kept: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._folder = workdir / SEGMENTS_DIR
        self._folder.mkdir(parents=True, exist_ok=True)
        self._segment_s = segment_s
        self._kept = kept
        self._clock = clock
        self._file: IO[str] | None = None
        self._started = 0.0
        self.seq = last_seq(workdir)

    def write(self, frame: dict[str, Any]) -> dict[str, Any]:
        """Number the frame (`seq`) and append it; the numbered frame is returned."""
        self.seq += 1
        numbered = {"seq": self.seq, **frame}
        now = self._clock()
        if self._file is None or now - self._started >= self._segment_s:
            self._roll(now)
        assert self._file is not None
        self._file.write(json.dumps(numbered, separators=(",", ":")) + "\n")
        self._file.flush()
        return numbered

    def _roll(self, now: float) -> None:
        self.close()
        path = self._folder / f"{_PREFIX}{self.seq:012d}{_SUFFIX}"
        self._file = path.open("a", encoding="utf-8")
        self._started = now
        for old in segment_paths(self._folder.parent)[: -self._kept]:
            old.unlink(missing_ok=True)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    @property
    def names(self) -> list[str]:
        return [path.name for path in segment_paths(self._folder.parent)]


@dataclass(frozen=True)
class FramePage:
    frames: list[dict[str, Any]]
    next_since: int
    """Pass as `since` for the frames after these (the last one's `seq`, or `since` when
    there were none)."""
    oldest: int | None
    """The `seq` of the oldest frame still kept (None: none), so a client that asked for
    frames already deleted knows it missed some."""


def read_since(workdir: Path, since: int, limit: int) -> FramePage:
    """Up to `limit` frames with `seq` > `since`, in order, from the kept segments."""
    paths = segment_paths(workdir)
    oldest = _first_seq(paths[0].name) if paths else None
    starts = [_first_seq(path.name) or 0 for path in paths]
    # the last segment whose first frame is at or before since+1 holds the first one wanted
    first = max((i for i, start in enumerate(starts) if start <= since + 1), default=0)
    frames: list[dict[str, Any]] = []
    for frame in _frames(paths[first:]):
        if frame["seq"] > since:
            frames.append(frame)
            if len(frames) >= limit:
                break
    return FramePage(frames, frames[-1]["seq"] if frames else since, oldest)


def _frames(paths: list[Path]) -> Iterator[dict[str, Any]]:
    for path in paths:
        try:
            lines = path.open("rb")
        except FileNotFoundError:  # deleted as the writer rolled
            continue
        with lines:
            for line in lines:
                if not line.endswith(b"\n"):
                    break  # being written
                try:
                    frame = json.loads(line)
                except ValueError:
                    continue  # torn by a crash
                if isinstance(frame, dict) and isinstance(frame.get("seq"), int):
                    yield frame
