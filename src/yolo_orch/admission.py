"""GPU lanes: one `asyncio.Semaphore` per device, so a second GPU is a second admission lane.

Only the dispatcher admits, from one task, so choosing lanes and taking their turns happens
without a suspension point in between: a multi-lane job takes all of its lanes or none, always
in ascending lane order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable, Iterator, Sequence
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
    semaphore: asyncio.Semaphore = field(init=False)

    def __post_init__(self) -> None:
        self.semaphore = asyncio.Semaphore(self.slots)

    @property
    def gpu_index(self) -> int | None:
        """The CUDA device index of a `cuda:N` lane; None for `cpu` and simulated lanes."""
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


class Lanes:
    def __init__(self, lane_ids: Sequence[str], slots_per_lane: int) -> None:
        if not lane_ids:
            raise ValueError("a host needs at least one lane")
        self._lanes = [
            Lane(id=lane_id, index=i, slots=slots_per_lane) for i, lane_id in enumerate(lane_ids)
        ]

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
    def free_slots(self) -> int:
        return sum(lane.slots - lane.busy for lane in self._lanes if lane.takes_work)

    async def try_admit(
        self, job_id: str, count: int, reserved: Collection[str] = ()
    ) -> tuple[Lane, ...] | None:
        """Take a turn on `count` lanes not in `reserved`, least busy first; all or none."""
        candidates = sorted(
            (lane for lane in self._lanes if lane.has_free_slot and lane.id not in reserved),
            key=lambda lane: (lane.busy, lane.index),
        )
        if len(candidates) < count:
            return None
        chosen = tuple(sorted(candidates[:count], key=lambda lane: lane.index))
        for lane in chosen:
            await lane.semaphore.acquire()  # never waits: each lane had a free slot
            lane.jobs.add(job_id)
        return chosen

    def lanes_to_hold(self, count: int, reserved: Collection[str]) -> set[str]:
        """The lanes a job that cannot start yet keeps from the jobs behind it, so a multi-lane
        job is not starved by a stream of smaller ones: free lanes first, then the least busy."""
        open_lanes = sorted(
            (lane for lane in self._lanes if lane.id not in reserved and lane.takes_work),
            key=lambda lane: (not lane.has_free_slot, lane.busy, lane.index),
        )
        return {lane.id for lane in open_lanes[:count]}

    def ride(self, job_ids: Iterable[str], lanes: Iterable[Lane]) -> None:
        """Note jobs joining a batch on `lanes`: they share the turn of the batch's holder."""
        for lane in lanes:
            lane.batched.update(job_ids)

    def unride(self, job_id: str, lanes: Iterable[Lane]) -> None:
        for lane in lanes:
            lane.batched.discard(job_id)

    def release(self, job_id: str, lanes: Iterable[Lane]) -> None:
        for lane in lanes:
            if job_id in lane.jobs:
                lane.jobs.discard(job_id)
                lane.semaphore.release()
