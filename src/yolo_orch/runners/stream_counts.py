"""Zone and line counts over a live stream's frames, from each frame's detections.

All coordinates are normalised to the image: 0..1, x to the right, y downwards. An object is
counted at its anchor, the centre of its box.

Zones (polygons of at least 3 points):

- `inside`: the objects of the latest frame whose anchor is inside the zone, per class, tracked
  or not. A point exactly on the zone's border counts as inside.
- `in` / `out`: tracked objects only. A track whose anchor was outside the zone when it was last
  seen and is inside now counts `in`, once; inside then outside counts `out`. A track first
  seen inside counts nothing: it was already there when counting began.

Lines (segments from `start` to `end`):

- `in` / `out`: tracked objects only, counted when the track's move from its previous anchor
  to its current one crosses the segment, its end points included; moves that pass beside the
  segment's ends are not counted. A line drawn from top to bottom counts objects moving left
  to right as `in`, right to left as `out`; a line drawn from left to right counts objects
  moving upwards as `in`. (In general, `in` is the line's direction, from `start` to `end`,
  turned a quarter turn anticlockwise as seen on the image.) A track that stops exactly on the
  line keeps the side it came from, so landing on the segment and then moving on across it
  counts one crossing, when it moves on; landing on it and going back counts none.

A track's class is the class of its latest sighting; counts and events use it. A track not seen
for `forget_after` consecutive frames is forgotten, which keeps memory bounded: seen again, it
counts as a new track. Untracked objects (no track id) count only towards `inside`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from yolo_orch.domain import JsonObject

__all__ = ["Counts", "Line", "Seen", "Zone"]

Point = tuple[float, float]


def _check_normalised(owner: str, points: Iterable[Point]) -> None:
    for x, y in points:
        if not (0.0 <= x <= 1.0 and 0.0 <= y <= 1.0):  # also rejects NaN
            raise ValueError(f"{owner}: point ({x}, {y}) is outside the image's 0..1 coordinates")


def _cross(start: Point, end: Point, p: Point) -> float:
    """Positive on the side that start->end, turned a quarter turn clockwise on the image (y
    down), points to: the side an object crossing `in` comes from."""
    return (end[0] - start[0]) * (p[1] - start[1]) - (end[1] - start[1]) * (p[0] - start[0])


def _sign(value: float) -> int:
    return (value > 0) - (value < 0)


@dataclass(frozen=True)
class Zone:
    """A polygon; its points in order, either winding."""

    name: str
    points: tuple[tuple[float, float], ...]

    def __post_init__(self) -> None:
        if len(self.points) < 3:
            raise ValueError(f"zone {self.name!r}: a polygon needs at least 3 points")
        _check_normalised(f"zone {self.name!r}", self.points)

    def contains(self, p: Point) -> bool:
        """Ray casting, with the border counted as inside (checked first, so it is exact)."""
        edges = list(zip(self.points, self.points[1:] + self.points[:1], strict=True))
        for a, b in edges:
            if _cross(a, b, p) == 0 and _within_box(a, b, p):
                return True
        inside = False
        x, y = p
        for (ax, ay), (bx, by) in edges:
            if (ay > y) != (by > y) and x < ax + (y - ay) * (bx - ax) / (by - ay):
                inside = not inside
        return inside


def _within_box(a: Point, b: Point, p: Point) -> bool:
    return min(a[0], b[0]) <= p[0] <= max(a[0], b[0]) and min(a[1], b[1]) <= p[1] <= max(a[1], b[1])


@dataclass(frozen=True)
class Line:
    """A counting segment; its direction (start to end) decides which way is `in`."""

    name: str
    start: tuple[float, float]
    end: tuple[float, float]

    def __post_init__(self) -> None:
        if self.start == self.end:
            raise ValueError(f"line {self.name!r}: start and end are the same point")
        _check_normalised(f"line {self.name!r}", (self.start, self.end))

    def side(self, p: Point) -> int:
        """+1 on the side `in` crossings come from, -1 on the other, 0 on the line."""
        return _sign(_cross(self.start, self.end, p))

    def spans(self, frm: Point, to: Point) -> bool:
        """Whether the segment's ends are on opposite sides of (or on) the move's own line.

        Only asked about a move that reaches the line's other side, so the move meets the
        infinite line at one point; that point is on the segment exactly when this holds."""
        return _sign(_cross(frm, to, self.start)) * _sign(_cross(frm, to, self.end)) <= 0


@dataclass(frozen=True)
class Seen:
    """One object in one frame: its track (None when untracked), class, and anchor."""

    track_id: int | None
    class_name: str
    x: float
    y: float


@dataclass(frozen=True)
class _Track:
    last_frame: int
    anchor: Point
    inside: list[bool]  # per zone, as of the latest sighting
    sides: list[int]  # per line, the latest non-zero side (0: never off the line yet)


@dataclass
class _Tally:
    """Per-class counts for one zone or line."""

    into: Counter[str] = field(default_factory=Counter)
    out_of: Counter[str] = field(default_factory=Counter)


def _unique_names(kind: str, names: Iterable[str]) -> None:
    repeated = sorted(name for name, n in Counter(names).items() if n > 1)
    if repeated:
        raise ValueError(f"{kind} names must be unique; repeated: {', '.join(repeated)}")


def _by_class(counter: Counter[str]) -> dict[str, int]:
    return {cls: n for cls, n in sorted(counter.items()) if n}


class Counts:
    """The counts of one stream; `update` is called once per frame, in frame order."""

    def __init__(
        self, zones: Sequence[Zone], lines: Sequence[Line], forget_after: int = 300
    ) -> None:
        _unique_names("zone", (zone.name for zone in zones))
        _unique_names("line", (line.name for line in lines))
        if forget_after < 1:
            raise ValueError(f"forget_after must be at least 1 frame, not {forget_after}")
        self._zones = tuple(zones)
        self._lines = tuple(lines)
        self._forget_after = forget_after
        self._frame = 0
        self._tracks: dict[int, _Track] = {}
        self._inside: list[Counter[str]] = [Counter() for _ in self._zones]
        # Classes ever inside each zone: `totals` reports them at 0 when they leave, so that a
        # gauge fed from it falls to 0 instead of keeping its last value.
        self._ever_inside: list[set[str]] = [set() for _ in self._zones]
        self._zone_tallies = [_Tally() for _ in self._zones]
        self._line_tallies = [_Tally() for _ in self._lines]

    def update(self, seen: Sequence[Seen]) -> list[JsonObject]:
        """Counts one frame's objects; returns the crossings it produced, in frame order."""
        self._frame += 1
        events: list[JsonObject] = []
        self._inside = [Counter() for _ in self._zones]
        for obj in seen:
            anchor = (obj.x, obj.y)
            inside = [zone.contains(anchor) for zone in self._zones]
            for index, is_inside in enumerate(inside):
                if is_inside:
                    self._inside[index][obj.class_name] += 1
                    self._ever_inside[index].add(obj.class_name)
            if obj.track_id is not None:
                events.extend(self._follow(obj.track_id, obj, anchor, inside))
        self._forget_stale()
        return events

    def _follow(
        self, track_id: int, obj: Seen, anchor: Point, inside: list[bool]
    ) -> list[JsonObject]:
        """A tracked object's zone and line crossings since its previous sighting."""
        sides = [line.side(anchor) for line in self._lines]
        track = self._tracks.get(track_id)
        if track is None:  # first sighting: where it is now was its place before counting
            self._tracks[track_id] = _Track(self._frame, anchor, inside, sides)
            return []
        events: list[JsonObject] = []
        for index, zone in enumerate(self._zones):
            entered = inside[index]
            if track.inside[index] != entered:
                tally = self._zone_tallies[index]
                (tally.into if entered else tally.out_of)[obj.class_name] += 1
                events.append(_event("zone", zone.name, "in" if entered else "out", obj))
        for index, line in enumerate(self._lines):
            before, now_side = track.sides[index], sides[index]
            if now_side == 0:
                sides[index] = before  # on the line: keep the side it came from
            elif before == -now_side and line.spans(track.anchor, anchor):
                going_in = before > 0
                tally = self._line_tallies[index]
                (tally.into if going_in else tally.out_of)[obj.class_name] += 1
                events.append(_event("line", line.name, "in" if going_in else "out", obj))
        self._tracks[track_id] = _Track(self._frame, anchor, inside, sides)
        return events

    def _forget_stale(self) -> None:
        stale = [
            track_id
            for track_id, track in self._tracks.items()
            if self._frame - track.last_frame >= self._forget_after
        ]
        for track_id in stale:
            del self._tracks[track_id]

    def snapshot(self) -> JsonObject:
        """Every zone and line, each with its non-zero per-class counts."""
        zones = {
            zone.name: {
                "inside": _by_class(self._inside[index]),
                "in": _by_class(self._zone_tallies[index].into),
                "out": _by_class(self._zone_tallies[index].out_of),
            }
            for index, zone in enumerate(self._zones)
        }
        lines = {
            line.name: {
                "in": _by_class(self._line_tallies[index].into),
                "out": _by_class(self._line_tallies[index].out_of),
            }
            for index, line in enumerate(self._lines)
        }
        return {"zones": zones, "lines": lines}

    def totals(self) -> list[tuple[str, str, str, str, int]]:
        """(kind, name, direction, class, value) rows for metrics: `in`/`out` never decrease;
        `inside` has a row for every class ever inside the zone, at 0 when none is now."""
        rows: list[tuple[str, str, str, str, int]] = []
        for index, zone in enumerate(self._zones):
            tally = self._zone_tallies[index]
            for cls in sorted(self._ever_inside[index]):
                rows.append(("zone", zone.name, "inside", cls, self._inside[index][cls]))
            rows.extend(("zone", zone.name, "in", c, n) for c, n in _by_class(tally.into).items())
            rows.extend(
                ("zone", zone.name, "out", c, n) for c, n in _by_class(tally.out_of).items()
            )
        for index, line in enumerate(self._lines):
            tally = self._line_tallies[index]
            rows.extend(("line", line.name, "in", c, n) for c, n in _by_class(tally.into).items())
            rows.extend(
                ("line", line.name, "out", c, n) for c, n in _by_class(tally.out_of).items()
            )
        return rows


def _event(kind: str, name: str, direction: str, obj: Seen) -> JsonObject:
    return {kind: name, "direction": direction, "class": obj.class_name, "track_id": obj.track_id}
