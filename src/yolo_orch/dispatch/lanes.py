"""GPU lanes: one `asyncio.Semaphore` per device, so a second GPU is a second admission lane.

Only the dispatcher admits, from one task, so choosing lanes and taking their turns happens
without a suspension point in between: a multi-lane job takes all of its lanes or none, always
in ascending lane order, and all of them on one node (`<node>/cuda:0`; this host's lanes have
no node part and are all one node).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field


@dataclass
class Lane:
    id: str
    index: int
    slots: int
    jobs: set[str] = field(default_factory=set)
    """The jobs holding its turns."""
    batched: set[str] = field(default_factory=set)
    """Jobs sharing a turn held by one of `jobs` (a batch sharing forward passes)."""
    healthy: bool = True
    """False while its GPU reports a fatal state: no new job starts here."""
    wedged: bool = False
    """A run's thread here ignored a stop (threads cannot be killed): no new job starts here
    until the server restarts."""
    stream_slots: int = 0
    """Streams it runs at once beside its turns (`streams_per_lane`)."""
    stream_fps: float = 0.0
    """The frames per second its streams may ask for together (`stream_fps_per_lane`)."""
    streams: dict[str, StreamShare] = field(default_factory=dict)
    """The streams holding a share of it, by job id."""
    semaphore: asyncio.Semaphore = field(init=False)

    def __post_init__(self) -> None:
        self.semaphore = asyncio.Semaphore(self.slots)

    @property
    def node(self) -> str:
        """The cluster node of a `<node>/<device>` lane; "" for this host's own lanes."""
        return self.id.rpartition("/")[0]

    @property
    def gpu_index(self) -> int | None:
        """The CUDA device index of a local `cuda:N` lane; None for `cpu`, simulated and
        other nodes' lanes."""
        kind, _, index = self.id.partition(":")
        return int(index) if kind == "cuda" and index.isdigit() else None

    @property
    def busy(self) -> int:
        return len(self.jobs)

    @property
    def has_free_slot(self) -> bool:
        return self.takes_work and not self.semaphore.locked()

    @property
    def takes_work(self) -> bool:
        return self.healthy and not self.wedged

    @property
    def streams_fps(self) -> float:
        return sum(share.fps for share in self.streams.values())

    def takes_stream(self, fps: float) -> bool:
        return (
            self.takes_work
            and len(self.streams) < self.stream_slots
            and self.streams_fps + fps <= self.stream_fps
        )


@dataclass(frozen=True)
class StreamShare:
    fps: float
    key: Hashable
    """What streams sharing the lane's forward passes have in common (model and params)."""


StreamShares = Callable[[str], tuple[int, float]]
"""A lane's stream slots and frames per second, by its id."""


def no_streams(lane_id: str) -> tuple[int, float]:
    return 0, 0.0


class Lanes:
    def __init__(
        self,
        lane_ids: Sequence[str],
        slots_per_lane: int,
        *,
        dynamic: bool = False,
        stream_shares: StreamShares = no_streams,
    ) -> None:
        """`dynamic`: the lanes of a cluster, which `add` and `remove` change as nodes come
        and go (and which may be none for a while). `stream_shares`: the streams each lane
        takes beside its turns."""
        if not lane_ids and not dynamic:
            raise ValueError("a host needs at least one lane")
        self._slots = slots_per_lane
        self._stream_shares = stream_shares
        self._lanes: list[Lane] = []
        self._next_index = 0
        self._admissions = itertools.count(1)
        self._admitted: dict[str, int] = {}
        """When each job holding turns took them, in admissions since start (none for a run
        followed again after a restart, which began before them all)."""
        self.add(lane_ids)

    def add(self, lane_ids: Iterable[str]) -> None:
        """New lanes, after every existing one in the admission order."""
        known = set(self.ids)
        for lane_id in lane_ids:
            if lane_id not in known:
                streams, fps = self._stream_shares(lane_id)
                lane = Lane(
                    lane_id, self._next_index, self._slots, stream_slots=streams, stream_fps=fps
                )
                self._lanes.append(lane)
                self._next_index += 1

    def remove(self, lane_ids: Collection[str]) -> None:
        """Lanes whose node left: no job starts there; the runs holding them release them as
        they end, as ever."""
        self._lanes = [lane for lane in self._lanes if lane.id not in lane_ids]

    def __iter__(self) -> Iterator[Lane]:
        return iter(self._lanes)

    def __len__(self) -> int:
        return len(self._lanes)

    @property
    def ids(self) -> list[str]:
        return [lane.id for lane in self._lanes]

    @property
    def healthy_count(self) -> int:
        return sum(lane.takes_work for lane in self._lanes)

    @property
    def total_slots(self) -> int:
        return sum(lane.slots for lane in self._lanes)

    @property
    def largest_node(self) -> int:
        """Lanes of the node with the most: the most one job can hold."""
        sizes: dict[str, int] = {}
        for lane in self._lanes:
            sizes[lane.node] = sizes.get(lane.node, 0) + 1
        return max(sizes.values(), default=0)

    @property
    def free_slots(self) -> int:
        return sum(lane.slots - lane.busy for lane in self._lanes if lane.takes_work)

    @property
    def stream_room(self) -> bool:
        """Whether some lane could take one more stream."""
        return any(lane.takes_work and len(lane.streams) < lane.stream_slots for lane in self)

    def try_admit_stream(self, job_id: str, fps: float, key: Hashable) -> Lane | None:
        """A share of the lane that has room for `fps` more frames per second, preferring one
        whose streams have `key` (their frames then share forward passes), then the one with
        the fewest streams. No turn is taken: batch jobs keep running beside streams."""
        fitting = [lane for lane in self._lanes if lane.takes_stream(fps)]
        if not fitting:
            return None

        def rank(lane: Lane) -> tuple[int, int, int]:
            alike = sum(share.key == key for share in lane.streams.values())
            return (-alike, len(lane.streams), lane.index)

        lane = min(fitting, key=rank)
        lane.streams[job_id] = StreamShare(fps, key)
        return lane

    async def try_admit(
        self, job_id: str, count: int, reserved: Collection[str] = ()
    ) -> tuple[Lane, ...] | None:
        """Take a turn on `count` lanes of one node, not in `reserved`, least busy first; all
        or none."""
        free = [lane for lane in self._lanes if lane.has_free_slot and lane.id not in reserved]
        chosen = _pick_on_one_node(free, count, key=lambda lane: (lane.busy, lane.index))
        if chosen is None:
            return None
        self._admitted[job_id] = next(self._admissions)
        for lane in chosen:
            await lane.semaphore.acquire()  # never waits: each lane had a free slot
            lane.jobs.add(job_id)
        return chosen

    def lanes_to_hold(self, count: int, reserved: Collection[str]) -> set[str]:
        """The lanes a job that cannot start yet keeps from the jobs behind it, so a multi-lane
        job is not starved by a stream of smaller ones: free lanes first, then the least busy,
        then those busy longest (their jobs started first, so likely end first), all on the one
        node nearest to having them free."""
        open_lanes = [lane for lane in self._lanes if lane.id not in reserved and lane.takes_work]

        def nearest_free(lane: Lane) -> tuple[bool | int, ...]:
            # A full lane frees a turn when its oldest job ends.
            taken = (self._admitted.get(job_id, 0) for job_id in lane.jobs)
            oldest = 0 if lane.has_free_slot else min(taken, default=0)
            return (not lane.has_free_slot, lane.busy, oldest, lane.index)

        chosen = _pick_on_one_node(open_lanes, count, key=nearest_free)
        return {lane.id for lane in chosen or ()}

    def ride(self, job_ids: Iterable[str], lanes: Iterable[Lane]) -> None:
        """Note jobs joining a batch on `lanes`: they share the turn of the batch's holder."""
        for lane in lanes:
            lane.batched.update(job_ids)

    def unride(self, job_id: str, lanes: Iterable[Lane]) -> None:
        for lane in lanes:
            lane.batched.discard(job_id)

    def release(self, job_id: str, lanes: Iterable[Lane]) -> None:
        """Give back the job's turns, or its stream share."""
        self._admitted.pop(job_id, None)
        for lane in lanes:
            lane.streams.pop(job_id, None)
            if job_id in lane.jobs:
                lane.jobs.discard(job_id)
                lane.semaphore.release()


def _pick_on_one_node(
    lanes: Iterable[Lane], count: int, key: Callable[[Lane], tuple[bool | int, ...]]
) -> tuple[Lane, ...] | None:
    """The best `count` lanes by `key` that share a node, in ascending lane order; of the nodes
    that have enough, the one whose worst chosen lane ranks best (then its next worst, ...): a
    job needs all of them. None when no node has `count`."""
    by_node: dict[str, list[Lane]] = {}
    for lane in sorted(lanes, key=key):
        by_node.setdefault(lane.node, []).append(lane)
    fits = [node_lanes[:count] for node_lanes in by_node.values() if len(node_lanes) >= count]
    if not fits:
        return None
    best = min(fits, key=lambda picked: sorted(map(key, picked), reverse=True))
    return tuple(sorted(best, key=lambda lane: lane.index))
