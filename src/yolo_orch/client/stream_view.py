"""What the `stream` command reads and shows: zones and lines written on the command line, and
one line of a running stream's health, rates and counts (from its progress detail)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from yolo_orch.client.shapes import Job
from yolo_orch.client.wire import Json

LINE_SYNTAX = "NAME:x1,y1,x2,y2"
ZONE_SYNTAX = "NAME:x1,y1;x2,y2;x3,y3[;...]"


class GeometryError(ValueError):
    """A --line or --zone the command line cannot read; its message says why."""


def parse_line(text: str) -> Json:
    """`NAME:x1,y1,x2,y2` as the params' line: {"name", "start", "end"}."""
    name, numbers = _named(text, LINE_SYNTAX)
    values = _coordinates(numbers.split(","), text, LINE_SYNTAX)
    if len(values) != 4:
        raise GeometryError(f"{text!r}: a line is two points, 4 numbers ({LINE_SYNTAX})")
    return {"name": name, "start": values[:2], "end": values[2:]}


def parse_zone(text: str) -> Json:
    """`NAME:x1,y1;x2,y2;x3,y3...` as the params' zone: {"name", "points"}."""
    name, corners = _named(text, ZONE_SYNTAX)
    points = []
    for corner in corners.split(";"):
        point = _coordinates(corner.split(","), text, ZONE_SYNTAX)
        if len(point) != 2:
            raise GeometryError(f"{text!r}: each corner is x,y ({ZONE_SYNTAX})")
        points.append(point)
    if len(points) < 3:
        raise GeometryError(f"{text!r}: a zone has 3 corners at least ({ZONE_SYNTAX})")
    return {"name": name, "points": points}


def _named(text: str, syntax: str) -> tuple[str, str]:
    # The last colon: the coordinates hold none, a name may.
    name, sep, rest = text.rpartition(":")
    if not sep or not name.strip() or not rest.strip():
        raise GeometryError(f"{text!r} is not {syntax}")
    return name.strip(), rest


def _coordinates(parts: list[str], text: str, syntax: str) -> list[float]:
    try:
        values = [float(part) for part in parts]
    except ValueError:
        raise GeometryError(f"{text!r}: coordinates are numbers ({syntax})") from None
    if any(not 0 <= value <= 1 for value in values):
        raise GeometryError(
            f"{text!r}: coordinates are fractions of the frame's width and height, 0 to 1"
        )
    return values


def stream_status(job: Job) -> str:
    """`running · 120 frames · live · 9.8 fps in, 9.7 out · p50 12 ms, p99 30 ms · line mid:
    2 in, 0 out`: what a stream's latest progress says, in one line."""
    parts = [str(job.state)]
    progress = job.progress
    detail: Json = (progress.detail if progress else None) or {}
    if progress is not None:
        parts.append(f"{progress.done} frames")
    if "health" in detail:
        parts.append(str(detail["health"]))
    if "fps_in" in detail:
        parts.append(f"{detail['fps_in']:g} fps in, {detail.get('fps_out', 0):g} out")
    latency = detail.get("latency_ms") or {}
    if latency.get("p50") is not None:
        parts.append(f"p50 {latency['p50']:g} ms, p99 {latency.get('p99') or 0:g} ms")
    parts += _counts(detail.get("counts") or [])
    return " · ".join(parts)


def _counts(per_source: list[Json]) -> list[str]:
    """Each zone's and line's counts, every class and source together."""
    totals: dict[tuple[str, str], Counter[str]] = {}
    for source in per_source:
        for what in ("zones", "lines"):
            for name, tallies in (source.get(what) or {}).items():
                total = totals.setdefault((what[:-1], name), Counter())
                for tally, by_class in tallies.items():
                    total[tally] += _sum(by_class)
    shown = []
    for (what, name), total in totals.items():
        tallies = ("inside", "in", "out") if what == "zone" else ("in", "out")
        shown.append(f"{what} {name}: " + ", ".join(f"{total[t]} {t}" for t in tallies))
    return shown


def _sum(by_class: Any) -> int:
    if isinstance(by_class, dict):
        return sum(int(n) for n in by_class.values())
    return int(by_class or 0)
