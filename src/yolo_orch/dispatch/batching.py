"""Cross-job dynamic batching: which queued jobs may share a forward pass with the job at the
head of a lane's turn, how many images a pass may hold, and what a pass that runs out of memory
does to the jobs in it.

Named as Triton's dynamic batcher names its knobs: `batch_max_images` (per lane kind) is its
`max_batch_size`, `batch_window_ms` its `max_queue_delay_microseconds`. The policy lives here;
runners only run the batch they are handed (`BatchRunner.run_batch`), each job with its own
context, and answer for each job on its own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

from yolo_orch.domain import Job, QueueOrder
from yolo_orch.kinds import KINDS


@dataclass(frozen=True)
class BatchPolicy:
    max_images: Mapping[str, int] = field(default_factory=dict)
    """Images one forward pass may hold, by lane kind (`cpu`, `cuda`, `sim`); absent or 1: jobs
    on that kind of lane never share a pass."""
    window_s: float = 0.0
    """How long a batch that has room waits for companions; 0: only jobs already queued."""

    def capacity(self, lane_id: str) -> int:
        return max(1, self.max_images.get(lane_id.partition(":")[0], 1))

    @property
    def lookahead(self) -> int:
        """Queued jobs worth reading beyond the lanes' own window, to find companions in."""
        return max((*self.max_images.values(), 1))


def batch_key(job: Job) -> Hashable | None:
    """What jobs must have in common to share a forward pass; None for a job that never does."""
    return KINDS[job.kind].batch_key(job)


def image_count(job: Job) -> int:
    """What a job puts through the forward pass (an inference job's images)."""
    return KINDS[job.kind].images(job)


def is_stream(job: Job) -> bool:
    """A live stream: it holds a stream share of a lane, not a turn (`Kind.stream_fps`)."""
    return KINDS[job.kind].stream_fps is not None


def stream_fps(job: Job) -> float:
    """The frames per second a stream asks of its lane."""
    fps_of = KINDS[job.kind].stream_fps
    return 0.0 if fps_of is None else fps_of(job)


def companions(
    head: Job,
    queue: Sequence[Job],
    order: QueueOrder,
    room: int,
    *,
    excluded: Callable[[Job], bool] = lambda job: False,
    stop_at: Callable[[Job], bool] = lambda job: False,
) -> list[Job]:
    """The jobs of `queue` (in start order) that join `head`'s forward pass, `room` images at
    most: those with its batch key, but never one of lower priority than a job before it that
    cannot join (so a batch never lets lower-priority work overtake it). `excluded` jobs are
    passed over as if absent (already running); the scan ends at a `stop_at` job."""
    joined: list[Job] = []
    if room <= 0:  # before the key, which reads the head's files
        return joined
    key = batch_key(head)
    if key is None:
        return joined
    blocking: int | None = None
    """The highest effective priority among the jobs passed over that could not join."""
    for job in queue:
        if room <= 0 or stop_at(job):
            break
        if excluded(job):
            continue
        priority = order.effective_priority(job.priority, job.created_at)
        fits = batch_key(job) == key and image_count(job) <= room
        if fits and (blocking is None or priority >= blocking):
            joined.append(job)
            room -= image_count(job)
        elif not fits:
            blocking = priority if blocking is None else max(blocking, priority)
    return joined


@dataclass
class LaneBatches:
    """What a lane's batches came to since start: runs by the jobs sharing them, and the time
    batches held the lane's turn waiting for companions."""

    sizes: Counter[int] = field(default_factory=Counter)
    wait_s: float = 0.0

    def add(self, jobs: int, wait_s: float) -> None:
        self.sizes[jobs] += 1
        self.wait_s += wait_s

    @property
    def runs(self) -> int:
        return sum(self.sizes.values())

    @property
    def mean_jobs(self) -> float | None:
        runs = self.runs
        return sum(size * count for size, count in self.sizes.items()) / runs if runs else None
