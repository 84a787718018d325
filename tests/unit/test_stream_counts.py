"""Zone and line counts: the semantics the user docs promise, frame by frame."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from yolo_orch.runners.stream_counts import Counts, Line, Seen, Zone

SQUARE = Zone("door", ((0.25, 0.25), (0.75, 0.25), (0.75, 0.75), (0.25, 0.75)))
TOP_TO_BOTTOM = Line("gate", (0.5, 0.25), (0.5, 0.75))
LEFT_TO_RIGHT = Line("road", (0.25, 0.5), (0.75, 0.5))


def person(x: float, y: float, track_id: int | None = 1, cls: str = "person") -> Seen:
    return Seen(track_id, cls, x, y)


def run(counts: Counts, *frames: list[Seen]) -> list[list[dict[str, object]]]:
    return [counts.update(frame) for frame in frames]


def test_a_track_walking_into_and_out_of_a_zone_counts_in_then_out() -> None:
    counts = Counts([SQUARE], [])
    events = run(counts, [person(0.1, 0.5)], [person(0.5, 0.5)], [person(0.9, 0.5)])
    assert events == [
        [],
        [{"zone": "door", "direction": "in", "class": "person", "track_id": 1}],
        [{"zone": "door", "direction": "out", "class": "person", "track_id": 1}],
    ]
    assert counts.snapshot()["zones"]["door"] == {
        "inside": {},
        "in": {"person": 1},
        "out": {"person": 1},
    }


def test_inside_is_the_latest_frame_only_and_counts_tracked_and_untracked() -> None:
    counts = Counts([SQUARE], [])
    counts.update([person(0.5, 0.5, 1), person(0.4, 0.4, None), person(0.1, 0.1, None)])
    assert counts.snapshot()["zones"]["door"]["inside"] == {"person": 2}
    counts.update([person(0.4, 0.4, None)])
    assert counts.snapshot()["zones"]["door"]["inside"] == {"person": 1}
    counts.update([])
    assert counts.snapshot()["zones"]["door"]["inside"] == {}


def test_a_track_first_seen_inside_counts_nothing_until_it_leaves() -> None:
    counts = Counts([SQUARE], [])
    events = run(counts, [person(0.5, 0.5)], [person(0.6, 0.5)], [person(0.9, 0.5)])
    assert events[:2] == [[], []]
    assert [e["direction"] for e in events[2]] == ["out"]
    assert counts.snapshot()["zones"]["door"]["in"] == {}


def test_untracked_objects_count_only_inside() -> None:
    counts = Counts([SQUARE], [TOP_TO_BOTTOM])
    events = run(
        counts, [person(0.1, 0.5, None)], [person(0.5, 0.5, None)], [person(0.9, 0.5, None)]
    )
    assert events == [[], [], []]
    assert counts.snapshot()["zones"]["door"] == {"inside": {}, "in": {}, "out": {}}
    assert counts.snapshot()["lines"]["gate"] == {"in": {}, "out": {}}


def test_a_point_on_the_zone_border_counts_as_inside() -> None:
    counts = Counts([SQUARE], [])
    counts.update([person(0.25, 0.5, None), person(0.75, 0.75, None), person(0.5, 0.25, None)])
    assert counts.snapshot()["zones"]["door"]["inside"] == {"person": 3}


def test_a_concave_zone_excludes_its_notch() -> None:
    u_shape = Zone(
        "u",
        (
            (0.1, 0.1),
            (0.3, 0.1),
            (0.3, 0.6),
            (0.7, 0.6),
            (0.7, 0.1),
            (0.9, 0.1),
            (0.9, 0.9),
            (0.1, 0.9),
        ),
    )
    assert u_shape.contains((0.2, 0.3))
    assert not u_shape.contains((0.5, 0.3))
    assert u_shape.contains((0.5, 0.8))


def test_a_line_from_top_to_bottom_counts_left_to_right_as_in() -> None:
    counts = Counts([], [TOP_TO_BOTTOM])
    events = run(counts, [person(0.4, 0.5)], [person(0.6, 0.5)], [person(0.4, 0.5)])
    assert events == [
        [],
        [{"line": "gate", "direction": "in", "class": "person", "track_id": 1}],
        [{"line": "gate", "direction": "out", "class": "person", "track_id": 1}],
    ]


def test_a_line_from_left_to_right_counts_upwards_as_in() -> None:
    counts = Counts([], [LEFT_TO_RIGHT])
    up = run(counts, [person(0.5, 0.6)], [person(0.5, 0.4)])
    down = run(counts, [person(0.5, 0.6)])
    assert [e["direction"] for e in up[1]] == ["in"]
    assert [e["direction"] for e in down[0]] == ["out"]
    assert counts.snapshot()["lines"]["road"] == {"in": {"person": 1}, "out": {"person": 1}}


def test_landing_on_the_line_then_moving_on_counts_one_crossing() -> None:
    counts = Counts([], [TOP_TO_BOTTOM])
    events = run(
        counts, [person(0.4, 0.5)], [person(0.5, 0.5)], [person(0.5, 0.6)], [person(0.6, 0.5)]
    )
    assert events[:3] == [[], [], []]
    assert [e["direction"] for e in events[3]] == ["in"]
    assert counts.snapshot()["lines"]["gate"] == {"in": {"person": 1}, "out": {}}


def test_landing_on_the_line_and_going_back_counts_nothing() -> None:
    counts = Counts([], [TOP_TO_BOTTOM])
    events = run(counts, [person(0.4, 0.5)], [person(0.5, 0.5)], [person(0.4, 0.5)])
    assert events == [[], [], []]


def test_crossing_through_the_segments_end_point_counts_once() -> None:
    counts = Counts([], [TOP_TO_BOTTOM])
    events = run(counts, [person(0.4, 0.65)], [person(0.6, 0.85)])  # through (0.5, 0.75)
    assert [e["direction"] for e in events[1]] == ["in"]


def test_passing_beside_the_segments_end_is_not_a_crossing() -> None:
    counts = Counts([], [TOP_TO_BOTTOM])
    events = run(
        counts, [person(0.4, 0.9)], [person(0.6, 0.9)], [person(0.6, 0.5)], [person(0.4, 0.5)]
    )
    assert events[:3] == [[], [], []]
    # having passed beside it, the track is on the right: back across the segment is `out`
    assert [e["direction"] for e in events[3]] == ["out"]


def test_landing_on_the_line_beside_the_segment_then_crossing_is_not_counted() -> None:
    counts = Counts([], [TOP_TO_BOTTOM])
    events = run(counts, [person(0.4, 0.9)], [person(0.5, 0.9)], [person(0.6, 0.9)])
    assert events == [[], [], []]


def test_a_track_unseen_for_forget_after_frames_is_new_when_it_returns() -> None:
    counts = Counts([SQUARE], [], forget_after=2)
    events = run(counts, [person(0.1, 0.5)], [], [], [person(0.5, 0.5)])
    assert events == [[], [], [], []]


def test_a_track_unseen_for_fewer_frames_is_still_followed() -> None:
    counts = Counts([SQUARE], [], forget_after=2)
    events = run(counts, [person(0.1, 0.5)], [], [person(0.5, 0.5)])
    assert [e["direction"] for e in events[2]] == ["in"]


def test_other_tracks_keep_a_track_alive_only_by_being_seen_themselves() -> None:
    counts = Counts([SQUARE], [], forget_after=2)
    events = run(
        counts,
        [person(0.1, 0.5, 1), person(0.1, 0.5, 2)],
        [person(0.1, 0.5, 2)],
        [person(0.1, 0.5, 2)],
        [person(0.5, 0.5, 1), person(0.5, 0.5, 2)],
    )
    assert [e["track_id"] for e in events[3]] == [2]


def test_classes_are_counted_apart_and_a_track_takes_its_latest_class() -> None:
    counts = Counts([SQUARE], [TOP_TO_BOTTOM])
    run(
        counts,
        [person(0.1, 0.5, 1, "car"), person(0.1, 0.4, 2, "person")],
        [person(0.6, 0.5, 1, "truck"), person(0.6, 0.4, 2, "person")],
    )
    snapshot = counts.snapshot()
    assert snapshot["zones"]["door"] == {
        "inside": {"person": 1, "truck": 1},
        "in": {"person": 1, "truck": 1},
        "out": {},
    }
    assert snapshot["lines"]["gate"] == {"in": {"person": 1, "truck": 1}, "out": {}}


def test_snapshot_lists_every_zone_and_line_even_with_nothing_counted() -> None:
    counts = Counts([SQUARE, Zone("corner", ((0, 0), (0.1, 0), (0, 0.1)))], [TOP_TO_BOTTOM])
    assert counts.snapshot() == {
        "zones": {
            "door": {"inside": {}, "in": {}, "out": {}},
            "corner": {"inside": {}, "in": {}, "out": {}},
        },
        "lines": {"gate": {"in": {}, "out": {}}},
    }


def test_totals_are_flat_rows_and_inside_falls_to_zero_when_emptied() -> None:
    counts = Counts([SQUARE], [TOP_TO_BOTTOM])
    run(counts, [person(0.4, 0.1)], [person(0.6, 0.5)])
    assert counts.totals() == [
        ("zone", "door", "inside", "person", 1),
        ("zone", "door", "in", "person", 1),
        ("line", "gate", "in", "person", 1),
    ]
    counts.update([])
    assert ("zone", "door", "inside", "person", 0) in counts.totals()


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Zone("z", ((0, 0), (1, 1))), "at least 3 points"),
        (lambda: Zone("z", ((0, 0), (1, 0), (1, 1.5))), "outside"),
        (lambda: Zone("z", ((0, 0), (1, 0), (float("nan"), 1))), "outside"),
        (lambda: Line("l", (0.5, 0.5), (0.5, 0.5)), "same point"),
        (lambda: Line("l", (-0.1, 0.5), (0.5, 0.5)), "outside"),
        (lambda: Counts([SQUARE, SQUARE], []), "zone names must be unique; repeated: door"),
        (lambda: Counts([], [TOP_TO_BOTTOM, TOP_TO_BOTTOM]), "line names must be unique"),
        (lambda: Counts([], [], forget_after=0), "forget_after"),
    ],
)
def test_invalid_zones_lines_and_settings_are_refused(
    build: Callable[[], object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        build()


def test_a_zone_and_a_line_may_share_a_name() -> None:
    Counts([Zone("gate", SQUARE.points)], [TOP_TO_BOTTOM])


@pytest.mark.parametrize("seed", range(20))
def test_a_track_wandering_back_and_forth_across_a_line_counts_exactly_its_net_crossings(
    seed: int,
) -> None:
    """Moves kept within the segment's height always cross the segment when they change side,
    so in - out is where the track is against where it began: 0 or +-1, never a double count.
    A coarse grid makes many moves land exactly on the line or on its end points."""
    rng = random.Random(seed)
    counts = Counts([], [TOP_TO_BOTTOM])
    first_side = side = 0
    for _ in range(200):
        x, y = rng.randint(0, 10) / 10, rng.randint(5, 15) / 20
        counts.update([person(x, y)])
        if x != 0.5:
            side = 1 if x < 0.5 else -1  # left of a downward line is its `in` side's origin
            first_side = first_side or side
        gate = counts.snapshot()["lines"]["gate"]
        assert (
            gate["in"].get("person", 0) - gate["out"].get("person", 0) == (first_side - side) // 2
        )
