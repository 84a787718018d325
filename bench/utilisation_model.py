"""What lane utilisation the admission rules allow, and what a per-job overhead costs: the job
streams of `bench.admission` and `bench.ray_cluster` (the same seed, so the same jobs in the same
order) replayed through the dispatcher's admission rules, with the real `admission.Lanes`, on a
simulated clock, with no server.

    python -m bench.utilisation_model [--overheads 0 2 4 6 10 20 30]

Each job holds its lanes for its `sim_seconds` plus the overhead (what the dispatcher, the store
and the executor add to a job on its lane: claim, thread hand-off, recording); admission takes
jobs from the head of the queue as `Dispatcher._admit_waiting` does: a job that cannot start
holds the lanes it waits for (`Lanes.lanes_to_hold`), and only jobs that fit on other lanes pass
it. Overhead 0 is the bound that the order alone sets: the lanes a 2-lane job waits for idle
meanwhile. Utilisation as the benches compute it: sim_seconds x gpus / (lanes x wall).
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import random

from bench.admission import job_body
from yolo_orch.dispatch.lanes import Lane, Lanes

WINDOW = 16
"""Queue positions an admission pass looks at (the dispatcher's window for 4 lanes, 1 slot)."""


def stream(count: int, seconds: float, training_share: float) -> list[int]:
    """The lanes each job of the bench's stream needs, in submission order."""
    rng = random.Random(42)
    return [int(job_body(i, seconds, training_share, rng).get("gpus", 1)) for i in range(count)]


async def replay(lane_ids: list[str], gpus: list[int], seconds: float, overhead: float) -> float:
    lanes = Lanes(lane_ids, 1)
    queue = list(range(len(gpus)))
    ends: list[tuple[float, int, tuple[Lane, ...]]] = []
    now = 0.0
    while queue or ends:
        started = True
        while started and lanes.free_slots:
            started = False
            reserved: set[str] = set()
            for job in queue[:WINDOW]:
                if len(reserved) == len(lanes) or lanes.free_slots == 0:
                    break
                held = await lanes.try_admit(str(job), gpus[job], reserved)
                if held is None:
                    reserved |= lanes.lanes_to_hold(gpus[job], reserved)
                    continue
                heapq.heappush(ends, (now + seconds + overhead, job, held))
                queue.remove(job)
                started = True
        now, job, held = heapq.heappop(ends)
        lanes.release(str(job), held)
    return sum(gpus) * seconds / (len(lane_ids) * now)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--overheads", type=float, nargs="+", default=[0, 2, 4, 6, 10, 20, 30])
    args = parser.parse_args()
    one_host = ["sim:0", "sim:1", "sim:2", "sim:3"]
    two_nodes = ["a/cuda:0", "a/cuda:1", "b/cuda:0", "b/cuda:1"]
    # (label, lanes, sim_seconds, job count): the counts the benches queue by default
    cases = [
        ("bench.admission 0.05 s, one host x 4", one_host, 0.05, int(12 * 4 / (0.05 * 1.2))),
        ("bench.admission 0.2 s, one host x 4", one_host, 0.2, int(12 * 4 / (0.2 * 1.2))),
        ("bench.ray_cluster 0.2 s, one host x 4", one_host, 0.2, int(6 * 4 / (0.2 * 1.2))),
        ("bench.ray_cluster 0.2 s, 2 nodes x 2", two_nodes, 0.2, int(6 * 4 / (0.2 * 1.2))),
    ]
    print("utilisation of the benches' job streams (20 % 2-lane training) per overhead per job")
    print("| stream | jobs | " + " | ".join(f"{ms:g} ms" for ms in args.overheads) + " |")
    print("|---|---|" + "---|" * len(args.overheads))
    for label, lane_ids, seconds, count in cases:
        gpus = stream(count, seconds, 0.2)
        row = [asyncio.run(replay(lane_ids, gpus, seconds, ms / 1000)) for ms in args.overheads]
        print(f"| {label} | {count} | " + " | ".join(f"{u:.3f}" for u in row) + " |")


if __name__ == "__main__":
    main()
